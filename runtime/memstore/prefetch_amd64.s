#include "textflag.h"

// func prefetch(p unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX): the line, for writing (the assembler has no mnemonic).
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET
