package fingerprint

import (
	"encoding/binary"
	"hash/maphash"
)

// LocalStreamSum is the process-local fingerprint of version v (a [Local]
// version) of the whole stream st, as the package documentation defines
// it: two maphash.Bytes, with the process's seeds, over st in one piece,
// then the process tag.
func LocalStreamSum(v byte, st []byte) Fingerprint {
	f := Fingerprint{v}
	binary.LittleEndian.PutUint64(f[1:], maphash.Bytes(localSeeds[0], st))
	binary.LittleEndian.PutUint64(f[9:], maphash.Bytes(localSeeds[1], st))
	binary.LittleEndian.PutUint64(f[17:], localTag)
	return f
}
