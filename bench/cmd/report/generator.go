package main

import (
	"fmt"
	"strings"

	_ "github.com/idemgen/idemgen/generator/cli" // registers the emitters the benchmark runs
	"github.com/idemgen/idemgen/generator/emitter"
)

func (r *runner) generator() (string, error) {
	rs, err := r.bench("generator", "./generator", ".", "1x")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| generator | time/op | B/op | allocs/op |\n|---|---:|---:|---:|\n")
	label := map[string]string{
		"Generate/idemgen":      "`idemgen generate` (every emitter registered in this build: %s)",
		"Generate/oapi-codegen": "oapi-codegen v2.8.2 in-process (types, strict-server, std-http-server, client; load + generate + format)",
	}
	for _, n := range []string{"Generate/idemgen", "Generate/oapi-codegen"} {
		t := rs.stat(n, "ns/op")
		if !t.ok {
			fmt.Fprintf(&b, "| %s | *missing* | | |\n", n)
			continue
		}
		by, _ := rs.median(n, "B/op")
		al, _ := rs.median(n, "allocs/op")
		l := label[n]
		if strings.Contains(l, "%s") {
			l = fmt.Sprintf(l, strings.Join(emitter.Names(), ", "))
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s | %s |\n", l, dur(t.Center), t.pct(), bytesStr(by), count(al))
	}
	return b.String(), nil
}
