package s3sqscdk_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/s3sqs/s3sqs/infra/s3sqscdk"
)

// TestMain stops the jsii runtime (one node process per test binary) at
// the end.
func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

const (
	testAccount = "111122223333"
	testRegion  = "eu-west-1"
)

// codeDirs returns two directories, each with a placeholder bootstrap,
// standing in for `make build` output.
func codeDirs(t *testing.T) (ingest, fanout string) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"s3ingest", "fanout"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "bootstrap"), []byte("placeholder "+d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "s3ingest"), filepath.Join(root, "fanout")
}

// fixture is one synthesized stack holding the construct.
type fixture struct {
	app   awscdk.App
	stack awscdk.Stack
	s     *s3sqscdk.S3SQS
	tmpl  template
}

// build creates an app and a stack holding the construct with props (code
// directories filled in when empty); before runs on the app first, for
// example to add cdk-nag. It does not synthesize.
func build(t *testing.T, props s3sqscdk.Props, before func(app awscdk.App)) *fixture {
	t.Helper()
	in, fo := codeDirs(t)
	if props.Ingest.CodeDir == "" {
		props.Ingest.CodeDir = in
	}
	if props.Fanout.CodeDir == "" {
		props.Fanout.CodeDir = fo
	}
	f := &fixture{}
	catch(t, func() {
		f.app = awscdk.NewApp(&awscdk.AppProps{
			Outdir:  jsii.String(t.TempDir()),
			Context: &map[string]any{s3sqscdk.FeatureFlagRestrictSqsDecryption: true},
		})
		if before != nil {
			before(f.app)
		}
		f.stack = awscdk.NewStack(f.app, jsii.String("Test"), &awscdk.StackProps{
			Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
		})
		s, err := s3sqscdk.New(f.stack, "S3SQS", &props)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		f.s = s
	})
	if f.s == nil {
		t.FailNow()
	}
	return f
}

// synth builds and synthesizes, returning the template as JSON maps.
func synth(t *testing.T, props s3sqscdk.Props) *fixture {
	t.Helper()
	f := build(t, props, nil)
	f.synth(t)
	return f
}

func (f *fixture) synth(t *testing.T) {
	t.Helper()
	catch(t, func() {
		raw := *assertions.Template_FromStack(f.stack, nil).ToJSON()
		b, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		var tm template
		if err := json.Unmarshal(b, &tm); err != nil {
			t.Fatal(err)
		}
		f.tmpl = tm
	})
	if f.tmpl.Resources == nil {
		t.FailNow()
	}
}

// catch turns a panic out of jsii (a failed assertion, a CDK validation
// error) into a test error, so that one failure does not end the binary.
func catch(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v", r)
		}
	}()
	fn()
}

// template is a synthesized CloudFormation template.
type template struct {
	Resources map[string]resource `json:"Resources"`
	Outputs   map[string]any      `json:"Outputs"`
}

type resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
	DependsOn  []string       `json:"DependsOn"`
	Metadata   map[string]any `json:"Metadata"`
}

// ofType returns the logical ids of the resources of type typ, sorted.
func (tm template) ofType(typ string) []string {
	var ids []string
	for id, r := range tm.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// res returns the resource id, failing the test when it is missing.
func (f *fixture) res(t *testing.T, id string) resource {
	t.Helper()
	r, ok := f.tmpl.Resources[id]
	if !ok {
		t.Fatalf("no resource %s in the template", id)
	}
	return r
}

// id is the logical id of c's CloudFormation resource (c itself, or its
// default child).
func (f *fixture) id(c constructs.IConstruct) string {
	el, ok := c.(awscdk.CfnElement)
	if !ok {
		el = c.Node().DefaultChild().(awscdk.CfnElement)
	}
	return *f.stack.GetLogicalId(el)
}

// CloudFormation intrinsic functions, as they appear in the JSON.
func ref(id string) any    { return map[string]any{"Ref": id} }
func getAtt(id string) any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }
func join(parts ...any) any {
	return map[string]any{"Fn::Join": []any{"", parts}}
}
func s3ARN(bucket any, suffix string) any {
	if name, ok := bucket.(string); ok {
		return join("arn:", ref("AWS::Partition"), ":s3:::"+name+suffix)
	}
	if suffix == "" {
		return join("arn:", ref("AWS::Partition"), ":s3:::", bucket)
	}
	return join("arn:", ref("AWS::Partition"), ":s3:::", bucket, suffix)
}

// canon is the canonical JSON of v (map keys sorted), for comparing.
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// list reads a JSON value that may be one item or a list of items.
func list(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	default:
		return []any{x}
	}
}

// grant is one action on one resource under one condition: IAM
// statements expanded, so that merged or split statements compare equal.
type grant struct {
	Action, Resource, Condition string
}

func (g grant) String() string {
	s := g.Action + " on " + g.Resource
	if g.Condition != "" && g.Condition != "null" {
		s += " if " + g.Condition
	}
	return s
}

// expand lists the grants of policy statements.
func expand(statements []any) []grant {
	var out []grant
	for _, st := range statements {
		m := st.(map[string]any)
		if m["Effect"] != "Allow" {
			continue
		}
		for _, a := range list(m["Action"]) {
			for _, r := range list(m["Resource"]) {
				out = append(out, grant{Action: a.(string), Resource: canon(r), Condition: canon(m["Condition"])})
			}
		}
	}
	return out
}

// roleGrants lists every grant of the role roleID, from the policies
// attached to it, sorted and without duplicates.
func (f *fixture) roleGrants(roleID string) []grant {
	var out []grant
	for _, id := range f.tmpl.ofType("AWS::IAM::Policy") {
		p := f.tmpl.Resources[id].Properties
		if !slices.ContainsFunc(list(p["Roles"]), func(r any) bool { return canon(r) == canon(ref(roleID)) }) {
			continue
		}
		doc := p["PolicyDocument"].(map[string]any)
		out = append(out, expand(list(doc["Statement"]))...)
	}
	if role, ok := f.tmpl.Resources[roleID]; ok {
		for _, pol := range list(role.Properties["Policies"]) {
			doc := pol.(map[string]any)["PolicyDocument"].(map[string]any)
			out = append(out, expand(list(doc["Statement"]))...)
		}
	}
	return sortGrants(out)
}

func sortGrants(gs []grant) []grant {
	slices.SortFunc(gs, func(a, b grant) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(gs)
}

// grants builds the expected grants: each action on each resource.
func grants(actions []string, resources []any, condition any) []grant {
	var out []grant
	for _, a := range actions {
		for _, r := range resources {
			out = append(out, grant{Action: a, Resource: canon(r), Condition: canon(condition)})
		}
	}
	return out
}

// diffGrants reports the grants missing from got and the unexpected ones.
func diffGrants(got, want []grant) string {
	want = sortGrants(want)
	var b strings.Builder
	for _, g := range want {
		if !slices.Contains(got, g) {
			fmt.Fprintf(&b, "\n  missing:    %s", g)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "\n  unexpected: %s", g)
		}
	}
	return b.String()
}

// prop digs into nested maps and lists: prop(r.Properties, "A", "B", 0).
func prop(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
