package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/idemgen/idemgen/generator/emit/docs"
	"github.com/idemgen/idemgen/generator/ir"
)

// TestRenderedStructure parses every golden page as GitHub-flavoured
// Markdown (goldmark with GFM) and checks what GitHub will show: one title,
// the sections, one heading per operation, tables that are tables with a
// cell per column on every row, and every in-page link pointing at a
// heading's GitHub anchor.
func TestRenderedStructure(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			spec := compileCase(t, c.spec, c.overlay)
			src, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "docs", c.name+".md"))
			require.NoError(t, err)
			md := goldmark.New(goldmark.WithExtensions(extension.GFM))
			doc := md.Parser().Parse(text.NewReader(src))

			var h1, h2, h3 []string
			anchors := map[string]bool{}
			var links []string
			tables := 0
			require.NoError(t, ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
				if !entering {
					return ast.WalkContinue, nil
				}
				switch n := n.(type) {
				case *ast.Heading:
					txt := plain(n, src)
					anchors[docs.Anchor(txt)] = true
					switch n.Level {
					case 1:
						h1 = append(h1, txt)
					case 2:
						h2 = append(h2, txt)
					case 3:
						h3 = append(h3, txt)
					}
				case *ast.Link:
					if d := string(n.Destination); strings.HasPrefix(d, "#") {
						links = append(links, d[1:])
					}
				case *east.Table:
					tables++
					header := n.FirstChild()
					cols := header.ChildCount()
					for row := header.NextSibling(); row != nil; row = row.NextSibling() {
						assert.Equal(t, cols, row.ChildCount(), "table row %q", plain(row, src))
					}
				}
				return ast.WalkContinue, nil
			}))
			require.Len(t, h1, 1)
			assert.True(t, strings.HasPrefix(h1[0], "Idempotency: "))
			if len(spec.Operations) == 0 {
				assert.Empty(t, h3)
				return
			}
			assert.Equal(t, []string{"Operations", "How to call these operations", "Errors"}, h2)
			require.Len(t, h3, len(spec.Operations))
			for i, op := range spec.Operations {
				assert.Equal(t, docs.Title(op), h3[i])
			}
			assert.Equal(t, 2+len(spec.Operations), tables, "overview, errors, one per operation")
			assert.NotEmpty(t, links)
			for _, l := range links {
				assert.True(t, anchors[l], "link #%s has no heading", l)
			}
			// Raw table rows have as many unescaped pipes as their header:
			// a pipe from the spec would otherwise split a cell.
			pipes := regexp.MustCompile(`(^|[^\\])\|`)
			var want int
			for _, line := range strings.Split(string(src), "\n") {
				if !strings.HasPrefix(line, "|") {
					want = 0
					continue
				}
				n := len(pipes.FindAllString(line, -1))
				if want == 0 {
					want = n
				}
				assert.Equal(t, want, n, "row %q", line)
			}
		})
	}
}

// plain is the text of a node as GitHub uses it for anchors: inline code
// and emphasis stripped to their text.
func plain(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(src))
				if t.SoftLineBreak() {
					b.WriteByte(' ')
				}
			}
			if s, ok := c.(*ast.String); ok {
				b.Write(s.Value)
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"POST /pets — addPet":                      "post-pets--addpet",
		"PATCH /coupons/{couponId} — updateCoupon": "patch-couponscouponid--updatecoupon",
		"How to call these operations":             "how-to-call-these-operations",
		"Errors":                                   "errors",
		"POST /a_b/c-d — x.y":                      "post-a_bc-d--xy",
	} {
		assert.Equal(t, want, docs.Anchor(in), in)
	}
}

// TestTitleRecordName: a heading names the operation as its records are
// named: the operationId, else the Go name.
func TestTitleRecordName(t *testing.T) {
	assert.Equal(t, "POST /pets — addPet", docs.Title(&ir.Operation{Method: "POST", Path: "/pets", OperationID: "addPet", GoName: "AddPet"}))
	assert.Equal(t, "POST /pets — PostPets", docs.Title(&ir.Operation{Method: "POST", Path: "/pets", GoName: "PostPets"}))
}
