package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/internal/gentest"

	"github.com/idemgen/idemgen/generator/cli"
)

// oapiOptionCases are oapi-codegen configurations (output-options) that
// change what idemgen's files refer to, each generated into its package:
// a client type of another name (client-type-name), optional parameters
// as plain values (prefer-skip-optional-pointer, which createGadget's
// x-go-type-skip-optional-pointer: false overrides), and operations left
// out (createLedger: idemgen must generate nothing for it).
var oapiOptionCases = []struct {
	pkg, options string
	omitted      bool // createLedger is left out
}{
	{"renamed", "client-type-name: MTClient", false},
	{"plainvalues", "prefer-skip-optional-pointer: true", false},
	{"excludeids", "exclude-operation-ids: [createLedger]", true},
	{"includeids", "include-operation-ids: [createWidget, createGadget, getLedger]", true},
	{"excludetags", "exclude-tags: [ledgers]", true},
	{"includetags", "include-tags: [widgets, gadgets]", true},
}

// TestOapiCodegenOptionsBuild runs oapi-codegen (strict std-http server and
// client) under each of oapiOptionCases' configurations, then idemgen
// generate -config with an idemgen.yaml naming that file
// (oapi-codegen-config:), and builds and vets the module: idemgen's server
// wrapper and client helpers must compile against what oapi-codegen
// generated. check -generated must find the files up to date, and both
// commands must name the operations left out.
func TestOapiCodegenOptionsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	spec := filepath.Join(gentest.RepoRoot(t), "testdata", "oapiconfig", "openapi.yaml")
	m := gentest.NewModule(t, "example.com/oapioptions")
	for _, tc := range oapiOptionCases {
		dir := filepath.Join(m.Dir, tc.pkg)
		oapiYAML := "package: " + tc.pkg + "\noutput: api.gen.go\ngenerate: {models: true, std-http-server: true, strict-server: true, client: true}\noutput-options: {" + tc.options + "}\n"
		m.Write(t, tc.pkg+"/oapi-codegen.yaml", []byte(oapiYAML))
		// An ignore may name an operation oapi-codegen leaves out: it is
		// still the spec's.
		m.Write(t, tc.pkg+"/idemgen.yaml", []byte("package: "+tc.pkg+"\nspec: "+spec+"\noapi-codegen-config: oapi-codegen.yaml\ngenerate: {server: true, client: true}\n"+
			"ignore: [{rule: problem-response-missing, operations: [\"POST /ledgers\"], reason: declared by the gateway}]\n"))
		var cfg codegen.Configuration
		require.NoError(t, yaml.Unmarshal([]byte(oapiYAML), &cfg))
		doc, err := openapi3.NewLoader().LoadFromFile(spec)
		require.NoError(t, err)
		code, err := codegen.Generate(doc, cfg)
		require.NoError(t, err, tc.pkg)
		m.Write(t, tc.pkg+"/api.gen.go", []byte(code))

		cfgPath := filepath.Join(dir, "idemgen.yaml")
		for _, args := range [][]string{{"generate", "-config", cfgPath}, {"check", "-generated", "-config", cfgPath}} {
			c, _, stderr := run(args...)
			require.Equal(t, cli.ExitOK, c, "%s: %v: %s", tc.pkg, args, stderr)
			assert.NotContains(t, stderr, "bad-ignore", "%s: %v", tc.pkg, args)
			if tc.omitted {
				assert.Contains(t, stderr, "leaves out 1 idempotent operation ("+strings.SplitN(tc.options, ":", 2)[0]+")", "%s: %v", tc.pkg, args)
				assert.Contains(t, stderr, "POST /ledgers (createLedger)", "%s: %v", tc.pkg, args)
			} else {
				assert.NotContains(t, stderr, "leaves out", "%s: %v", tc.pkg, args)
			}
		}
		server, err := os.ReadFile(filepath.Join(dir, "idempotency.gen.go"))
		require.NoError(t, err)
		assert.Equal(t, !tc.omitted, strings.Contains(string(server), "CreateLedger"), tc.pkg)
	}
	m.Go(t, "build", "./...")
	m.Go(t, "vet", "./...")
}

// TestLeftOutNotePosition: the note naming the operations oapi-codegen
// leaves out is at the output-options key that leaves them out in
// oapi-codegen's configuration (file:line:col: note:, as init's notes),
// the first in the file when several are set, in block and flow style,
// for check and generate.
func TestLeftOutNotePosition(t *testing.T) {
	spec := filepath.Join(gentest.RepoRoot(t), "testdata", "oapiconfig", "openapi.yaml")
	const head = "package: api\noutput: api.gen.go\ngenerate: {models: true, std-http-server: true, strict-server: true, client: true}\n"
	for _, tc := range []struct {
		options, at, keys string
	}{
		{"output-options:\n  skip-prune: true\n  exclude-operation-ids: [createLedger]\n  include-tags: [widgets, gadgets, ledgers]\n", ":6:3", "include-tags, exclude-operation-ids"},
		{"output-options: {include-tags: [widgets, gadgets]}\n", ":4:18", "include-tags"},
	} {
		dir := t.TempDir()
		oapi := filepath.Join(dir, "oapi-codegen.yaml")
		require.NoError(t, os.WriteFile(oapi, []byte(head+tc.options), 0o644))
		cfg := filepath.Join(dir, "idemgen.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte("package: api\nspec: "+spec+"\noapi-codegen-config: "+oapi+"\ngenerate: {server: true, client: true}\n"), 0o644))
		for _, cmd := range []string{"check", "generate"} {
			c, _, stderr := run(cmd, "-config", cfg)
			require.Equal(t, cli.ExitOK, c, "%s: %s", cmd, stderr)
			assert.Contains(t, stderr, oapi+tc.at+": note: oapi-codegen leaves out 1 idempotent operation ("+tc.keys+"), so idemgen generates nothing for it: POST /ledgers (createLedger)\n", cmd)
		}
	}
}

// TestClientWithoutOapiClient: idemgen's client helpers refer to
// oapi-codegen's client (ClientWithResponses, <Op>Response): turning them on
// while oapi-codegen-config generates no client is a usage error, as
// server.strict is without strict-server, for generate and both checks.
func TestClientWithoutOapiClient(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(gentest.RepoRoot(t), "testdata", "oapiconfig", "openapi.yaml")
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	write("oapi-codegen.yaml", "package: api\noutput: api.gen.go\ngenerate: {models: true, std-http-server: true, strict-server: true}\n")
	cfg := write("idemgen.yaml", "package: api\nspec: "+spec+"\noapi-codegen-config: oapi-codegen.yaml\ngenerate: {server: true, client: true}\n")
	for _, args := range [][]string{{"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}, {"check", "-config", cfg}} {
		c, _, stderr := run(args...)
		assert.Equal(t, cli.ExitUsage, c, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "does not generate oapi-codegen's client", args)
	}
	_, err := os.Stat(filepath.Join(dir, "idempotency.gen.go"))
	assert.True(t, os.IsNotExist(err), "generate wrote files")
	// Without the client emitter, the same file is fine.
	cfg = write("idemgen.yaml", "package: api\nspec: "+spec+"\noapi-codegen-config: oapi-codegen.yaml\ngenerate: {server: true}\n")
	c, _, stderr := run("generate", "-config", cfg)
	assert.Equal(t, cli.ExitOK, c, stderr)
}

// TestServeMuxConflict: two routes that net/http's ServeMux refuses
// together (modern-treasury's PATCH /api/{itemizable_type}/{itemizable_id}/line_items/{id}
// and PATCH /api/simulations/legal_entities/{id}/update_status: each is
// more specific in some segment) are a warning [servemux-conflict] of
// check, check -generated and generate when oapi-codegen generates
// std-http-server, and only then: at the later route's path key, about
// both operations, in -format json too, a warning with -strict, silenced
// by ignore: for the spec or for both operations (not for one of them).
// The warning is true: oapi-codegen's std-http server for the spec panics
// when its routes are registered.
func TestServeMuxConflict(t *testing.T) {
	spec := filepath.Join(gentest.RepoRoot(t), "testdata", "oapiconfig", "servemux", "openapi.yaml")
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	const base = "package: api\noutput: gen\noapi-codegen-config: oapi-codegen.yaml\ngenerate: {server: true}\nspec: "
	cfg := write("idemgen.yaml", base+spec+"\n")
	const (
		first  = "PATCH /api/simulations/legal_entities/{id}/update_status"
		second = "PATCH /api/{itemizable_type}/{itemizable_id}/line_items/{id}"
	)
	// At the path key of the second route (line 6 of the spec).
	warning := spec + `:6:3: warning: ` + filepath.Join(dir, "oapi-codegen.yaml") + ` generates std-http-server, whose ServeMux will panic at startup: pattern "` + second + `" conflicts with pattern "` + first + `"`
	for _, tt := range []struct {
		server string
		warn   bool
	}{{"std-http-server", true}, {"chi-server", false}, {"gorilla-server", false}} {
		write("oapi-codegen.yaml", "package: api\noutput: gen/api.gen.go\ngenerate: {models: true, "+tt.server+": true, strict-server: true}\n")
		for _, args := range [][]string{{"check", "-config", cfg}, {"check", "-strict", "-config", cfg}, {"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}} {
			c, _, stderr := run(args...)
			require.Equal(t, cli.ExitOK, c, "%s %v: %s", tt.server, args, stderr)
			assert.Equal(t, tt.warn, strings.Contains(stderr, warning), "%s %v: %s", tt.server, args, stderr)
			assert.Equal(t, tt.warn, strings.Contains(stderr, "[servemux-conflict]\n"), "%s %v: %s", tt.server, args, stderr)
			assert.NotContains(t, stderr, "registered at", tt.server)
		}
	}

	// -format json carries it, with both operations.
	write("oapi-codegen.yaml", "package: api\noutput: gen/api.gen.go\ngenerate: {models: true, std-http-server: true, strict-server: true}\n")
	c, stdout, stderr := run("check", "-format", "json", "-config", cfg)
	require.Equal(t, cli.ExitOK, c, stderr)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags), stdout)
	require.Len(t, diags, 1, stdout)
	assert.Equal(t, "servemux-conflict", diags[0]["rule"])
	assert.Equal(t, "warning", diags[0]["severity"])
	assert.Equal(t, 6.0, diags[0]["line"])
	assert.Equal(t, []any{first, second}, diags[0]["operations"])

	// Silenced by an ignore for the spec, or for both operations; one
	// names only one of the operations the conflict is about.
	for _, tt := range []struct {
		ignore   string
		silenced bool
	}{
		{"{rule: servemux-conflict, reason: routes registered by hand}", true},
		{`{rule: servemux-conflict, operations: ["` + first + `", "` + second + `"], reason: routes registered by hand}`, true},
		{`{rule: servemux-conflict, operations: ["` + second + `"], reason: routes registered by hand}`, false},
	} {
		write("idemgen.yaml", base+spec+"\nignore: ["+tt.ignore+"]\n")
		for _, args := range [][]string{{"check", "-config", cfg}, {"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}} {
			c, _, stderr := run(args...)
			require.Equal(t, cli.ExitOK, c, "%v: %s", args, stderr)
			assert.Equal(t, !tt.silenced, strings.Contains(stderr, warning), "%s %v: %s", tt.ignore, args, stderr)
			assert.NotContains(t, stderr, "[unused-ignore]", "%s %v", tt.ignore, args)
		}
	}
	// spec does not check it: its ignore is not unused there.
	c, _, stderr = run("spec", "-config", cfg, "-o", filepath.Join(dir, "api.yaml"), spec)
	require.Equal(t, cli.ExitOK, c, stderr)
	assert.NotContains(t, stderr, "[unused-ignore]")
	write("idemgen.yaml", base+spec+"\n")

	// Without the conflicting route, no warning.
	other := write("openapi.yaml", strings.Replace(mustRead(t, spec), "/line_items/{id}:", "/line_items/{id}/x:", 1))
	c, _, stderr = run("check", "-config", write("idemgen.yaml", base+other+"\n"))
	require.Equal(t, cli.ExitOK, c, stderr)
	assert.NotContains(t, stderr, "will panic", stderr)
	assert.NotContains(t, stderr, "servemux-conflict", stderr)

	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	var oapi codegen.Configuration
	require.NoError(t, yaml.Unmarshal([]byte("package: api\ngenerate: {models: true, std-http-server: true, strict-server: true}\n"), &oapi))
	doc, err := openapi3.NewLoader().LoadFromFile(spec)
	require.NoError(t, err)
	code, err := codegen.Generate(doc, oapi)
	require.NoError(t, err)
	m := gentest.NewModule(t, "example.com/servemux")
	m.Write(t, "api/api.gen.go", []byte(code))
	m.Write(t, "main.go", []byte(`package main

import (
	"context"

	"example.com/servemux/api"
)

type service struct{}

func (service) UpdateLineItem(context.Context, api.UpdateLineItemRequestObject) (api.UpdateLineItemResponseObject, error) {
	return nil, nil
}

func (service) UpdateStatus(context.Context, api.UpdateStatusRequestObject) (api.UpdateStatusResponseObject, error) {
	return nil, nil
}

func main() { api.Handler(api.NewStrictHandler(service{}, nil)) }
`))
	out, err := m.TryGo("run", ".")
	require.Error(t, err, out)
	assert.Contains(t, out, `panic: pattern "PATCH /api/{itemizable_type}/{itemizable_id}/line_items/{id}"`)
	assert.Contains(t, out, `conflicts with pattern "PATCH /api/simulations/legal_entities/{id}/update_status"`)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}
