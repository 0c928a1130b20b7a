package openapicheck

import (
	"fmt"
	"os"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"sigs.k8s.io/yaml"
)

// The document writes `nullable: true` beside `$ref` to let a field be null
// ("labels": null in an instance update, which the SDK always sends and the
// API reads as "unchanged"). OpenAPI 3.0 ignores a $ref's siblings, and so
// does the loader; honourNullable applies them as the document's authors
// meant (and OpenAPI 3.1 reads them): each such field becomes a nullable
// copy of the schema it refers to, leaving the shared schema alone.

// nullableRefs returns the places of the document, as key paths from its
// root, where a $ref has a `nullable: true` sibling.
func nullableRefs(path string) ([][]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root any
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var out [][]string
	var walk func(any, []string)
	walk = func(n any, at []string) {
		switch x := n.(type) {
		case map[string]any:
			if _, isRef := x["$ref"]; isRef && x["nullable"] == true {
				out = append(out, append([]string(nil), at...))
			}
			for k, v := range x {
				walk(v, append(at, k))
			}
		case []any:
			for _, v := range x {
				walk(v, append(at, "[]"))
			}
		}
	}
	walk(root, nil)
	return out, nil
}

// honourNullable makes the fields at places nullable in doc.
func honourNullable(doc *openapi3.T, places [][]string) error {
	for _, at := range places {
		if err := makeNullable(doc, at); err != nil {
			return fmt.Errorf("nullable $ref at %s: %w", strings.Join(at, "/"), err)
		}
	}
	return nil
}

func makeNullable(doc *openapi3.T, at []string) error {
	// Find the schema the path starts in.
	var slot **openapi3.SchemaRef
	rest := at
	switch {
	case len(at) >= 3 && at[0] == "components" && at[1] == "schemas":
		ref := doc.Components.Schemas[at[2]]
		slot, rest = &ref, at[3:]
	case len(at) >= 3 && at[0] == "paths":
		item := doc.Paths.Value(at[1])
		if item == nil {
			return fmt.Errorf("no path %s", at[1])
		}
		op := item.GetOperation(strings.ToUpper(at[2]))
		if op == nil {
			return nil // a path parameter or another part of the item
		}
		switch {
		case len(at) >= 7 && at[3] == "requestBody" && at[4] == "content" && at[6] == "schema":
			mt := op.RequestBody.Value.Content[at[5]]
			slot, rest = &mt.Schema, at[7:]
		case len(at) >= 8 && at[3] == "responses" && at[5] == "content" && at[7] == "schema":
			mt := op.Responses.Value(at[4]).Value.Content[at[6]]
			slot, rest = &mt.Schema, at[8:]
		default:
			return nil // parameters: none of the emulated ones
		}
	default:
		return nil
	}
	// Walk properties and items down to the field, then replace the
	// field's reference by a nullable copy of what it refers to.
	for len(rest) > 0 {
		s := (*slot).Value
		switch rest[0] {
		case "properties":
			if len(rest) < 2 || s.Properties[rest[1]] == nil {
				return fmt.Errorf("no property %v", rest)
			}
			p := s.Properties[rest[1]]
			if len(rest) == 2 {
				clone := *p.Value
				clone.Nullable = true
				s.Properties[rest[1]] = &openapi3.SchemaRef{Value: &clone}
				return nil
			}
			slot, rest = &p, rest[2:]
		case "items":
			if len(rest) == 1 {
				clone := *s.Items.Value
				clone.Nullable = true
				s.Items = &openapi3.SchemaRef{Value: &clone}
				return nil
			}
			slot, rest = &s.Items, rest[1:]
		default:
			return fmt.Errorf("cannot follow %q", rest[0])
		}
	}
	return fmt.Errorf("the $ref is the schema itself")
}
