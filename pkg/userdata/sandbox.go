package userdata

import (
	"errors"
	"fmt"
	"io"

	"github.com/google/go-jsonnet"
	"github.com/google/go-jsonnet/ast"
	"github.com/google/go-jsonnet/toolutils"
)

// templateName is the name Jsonnet gives the template in locations.
const templateName = "userData"

// evaluate runs a template with std.extVar('context') = ctxJSON and returns
// Jsonnet's JSON output. It runs in the sandbox process only: parsing and
// evaluating a hostile template may recurse until the Go stack overflows,
// which no recover can catch.
func evaluate(template, ctxJSON string) (string, *Error) {
	node, err := jsonnet.SnippetToAST(templateName, template)
	if err != nil {
		return "", templateError(position(err))
	}
	if keyword, path, found := findImport(node); found {
		return "", importError(keyword, path)
	}
	vm := newVM()
	vm.ExtCode("context", ctxJSON)
	out, err := vm.Evaluate(node)
	if err != nil {
		var refused *refusedImport
		if errors.As(err, &refused) {
			return "", importError(refused.keyword, refused.path)
		}
		return "", templateError(position(err))
	}
	return out, nil
}

// newVM is a Jsonnet VM that reads no file and writes nowhere.
func newVM() *jsonnet.VM {
	vm := jsonnet.MakeVM()
	vm.Importer(refuseImports{})
	vm.SetTraceOut(io.Discard)
	return vm
}

// findImport walks a parsed template for import, importstr or importbin and
// returns the first it meets. Jsonnet resolves imports lazily, so an import
// on a branch never taken would otherwise pass unnoticed; it is refused all
// the same, so a template's acceptance never depends on its data.
func findImport(root ast.Node) (keyword, path string, found bool) {
	stack := []ast.Node{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch n := n.(type) {
		case *ast.Import:
			return "import", literal(n.File), true
		case *ast.ImportStr:
			return "importstr", literal(n.File), true
		case *ast.ImportBin:
			return "importbin", literal(n.File), true
		}
		if n != nil {
			stack = append(stack, toolutils.Children(n)...)
		}
	}
	return "", "", false
}

func literal(s *ast.LiteralString) string {
	if s == nil {
		return ""
	}
	return s.Value
}

// refuseImports is the VM's importer: the static check already refused any
// import, so this only guards against one it missed.
type refuseImports struct{}

func (refuseImports) Import(_, path string) (jsonnet.Contents, string, error) {
	return jsonnet.Contents{}, "", &refusedImport{keyword: "import", path: path}
}

type refusedImport struct{ keyword, path string }

func (r *refusedImport) Error() string {
	return fmt.Sprintf("imports are not allowed in user data templates: %s %q", r.keyword, r.path)
}

// located is what Jsonnet's static (parse) errors offer besides their
// message, which quotes the template.
type located interface{ Loc() ast.LocationRange }

// position says where in the template an error is, and nothing of what it
// says: Jsonnet's messages quote values, which may be secret.
func position(err error) string {
	var rt jsonnet.RuntimeError
	if errors.As(err, &rt) {
		for _, f := range rt.StackTrace {
			if inTemplate(f.Loc) {
				return "error at line:column " + span(f.Loc)
			}
		}
		return "evaluation failed"
	}
	var st located
	if errors.As(err, &st) {
		if loc := st.Loc(); inTemplate(loc) {
			return "error at line:column " + span(loc)
		}
	}
	return "evaluation failed"
}

func inTemplate(lr ast.LocationRange) bool {
	return lr.File != nil && lr.File.DiagnosticFileName == templateName && lr.Begin.Line > 0
}

func span(lr ast.LocationRange) string {
	s := fmt.Sprintf("%d:%d", lr.Begin.Line, lr.Begin.Column)
	switch {
	case lr.End.Line == lr.Begin.Line && lr.End.Column != lr.Begin.Column:
		s += fmt.Sprintf("-%d", lr.End.Column)
	case lr.End.Line > lr.Begin.Line:
		s += fmt.Sprintf("-%d:%d", lr.End.Line, lr.End.Column)
	}
	return s
}
