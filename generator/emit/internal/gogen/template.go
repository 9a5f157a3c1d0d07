package gogen

import (
	"strings"

	"github.com/dave/jennifer/jen"
)

// Segment is a segment of a path template: static text (Prefix), or a
// parameter with optional literal text around it.
type Segment struct {
	Prefix, Suffix string
	Param          bool
}

// ParseTemplate splits a path template into segments, as the generated
// <prefix>Template function does at init.
func ParseTemplate(path string) []Segment {
	var out []Segment
	for s := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		i := strings.IndexByte(s, '{')
		j := strings.LastIndexByte(s, '}')
		if i < 0 || j < i {
			out = append(out, Segment{Prefix: s})
			continue
		}
		out = append(out, Segment{Prefix: s[:i], Suffix: s[j+1:], Param: true})
	}
	return out
}

// Rank orders segments by specificity: static, then a parameter with
// literal text around it, then a bare parameter.
func (s Segment) Rank() int {
	switch {
	case !s.Param:
		return 0
	case s.Prefix != "" || s.Suffix != "":
		return 1
	}
	return 2
}

// SegmentType writes the generated matcher's segment type, <px>Segment.
func SegmentType(f *jen.File, px string) {
	Doc(f, px+"Segment is a static path segment, or a parameter with optional literal text around it.")
	f.Type().Id(px+"Segment").Struct(
		jen.List(jen.Id("prefix"), jen.Id("suffix")).String(),
		jen.Id("param").Bool(),
	)
}

// TemplateFunc writes <px>Template, the generated ParseTemplate.
func TemplateFunc(f *jen.File, px string) {
	Doc(f, px+"Template splits a path template into segments.")
	f.Func().Id(px+"Template").Params(jen.Id("path").String()).Index().Id(px+"Segment").Block(
		jen.Var().Id("segs").Index().Id(px+"Segment"),
		jen.For(jen.Id("s").Op(":=").Range().Qual("strings", "SplitSeq").Call(jen.Qual("strings", "TrimPrefix").Call(jen.Id("path"), jen.Lit("/")), jen.Lit("/"))).Block(
			jen.List(jen.Id("i"), jen.Id("j")).Op(":=").List(jen.Qual("strings", "IndexByte").Call(jen.Id("s"), jen.LitRune('{')), jen.Qual("strings", "LastIndexByte").Call(jen.Id("s"), jen.LitRune('}'))),
			jen.If(jen.Id("i").Op("<").Lit(0).Op("||").Id("j").Op("<").Id("i")).Block(
				jen.Id("segs").Op("=").Append(jen.Id("segs"), jen.Id(px+"Segment").Values(jen.Dict{jen.Id("prefix"): jen.Id("s")})),
				jen.Continue(),
			),
			jen.Id("segs").Op("=").Append(jen.Id("segs"), jen.Id(px+"Segment").Values(jen.Dict{
				jen.Id("prefix"): jen.Id("s").Index(jen.Empty(), jen.Id("i")),
				jen.Id("suffix"): jen.Id("s").Index(jen.Id("j").Op("+").Lit(1), jen.Empty()),
				jen.Id("param"):  jen.True(),
			})),
		),
		jen.Return(jen.Id("segs")),
	)
}
