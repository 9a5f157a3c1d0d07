package cli

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/emitter"
)

// optionsHint returns, for the config file data that failed to decode,
// a hint for each top-level field that is an emitter setting written out
// of options: ("server.router: chi", or "server: {router: chi}", which
// reads as nested YAML but is the dotted key server.router), as
// "did you mean options: {server.router: chi}?"; "" when there is none.
func optionsHint(data []byte) string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return ""
	}
	names := emitter.OptionNames()
	var hints []string
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i].Value, root.Content[i+1]
		var set []string
		switch {
		case slices.Contains(names, k) && v.Kind == yaml.ScalarNode:
			set = append(set, k+": "+v.Value)
		case v.Kind == yaml.MappingNode && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, k+".") }):
			for j := 0; j+1 < len(v.Content); j += 2 {
				name := k + "." + v.Content[j].Value
				val := "…"
				if v.Content[j+1].Kind == yaml.ScalarNode {
					val = v.Content[j+1].Value
				}
				if slices.Contains(names, name) {
					set = append(set, name+": "+val)
				}
			}
		}
		if len(set) > 0 {
			hints = append(hints, fmt.Sprintf("line %d: %s: emitter settings are dotted keys of options:; did you mean options: {%s}?", root.Content[i].Line, k, strings.Join(set, ", ")))
		}
	}
	if len(hints) == 0 {
		return ""
	}
	var b bytes.Buffer
	for _, h := range hints {
		b.WriteString("\n  " + h)
	}
	fmt.Fprintf(&b, "\n  (the settings: %s)", strings.Join(names, ", "))
	return b.String()
}
