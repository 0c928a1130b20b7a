package webhooks

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// specPrototyper is a cloud that names the type of its provider spec, so
// that unknown fields are found even in a spec that does not parse.
// Without it the type of the spec ParseSpec returns serves, which encodes
// as the provider spec (see Defaulter), for specs that parse.
type specPrototyper interface {
	SpecPrototype() any
}

// maxWarnings bounds the unknown-field warnings of one request.
const maxWarnings = 10

// unknownFieldWarnings names each member of a provider spec that its cloud
// ignores.
func unknownFieldWarnings(c cloud.Cloud, ps machinev1.ProviderSpec, parsed cloud.Spec, path *field.Path) []string {
	if ps.Value == nil {
		return nil
	}
	var proto any
	if p, ok := c.(specPrototyper); ok {
		proto = p.SpecPrototype()
	} else if parsed != nil {
		proto = parsed
	}
	unknown := UnknownFields(ps.Value.Raw, proto)
	var warnings []string
	for i, f := range unknown {
		if i == maxWarnings {
			warnings = append(warnings, fmt.Sprintf("%s: %d more unknown fields", path, len(unknown)-maxWarnings))
			break
		}
		warnings = append(warnings, fmt.Sprintf("%s.%s: unknown field, ignored by the %s (misspelt?)", path, f, c.SpecKind()))
	}
	return warnings
}

// UnknownFields returns the members of the JSON object raw that decoding it
// into a value of prototype's type with encoding/json would silently drop,
// as paths ("flavour", "interfaces[1].netwrkUUID"), sorted. A misspelt
// optional field is not an error to the decoder, but it means a different
// server than the one the user meant.
//
// It follows encoding/json's rules, which the clouds' ParseSpec use: a
// member matches a field by its JSON name, or failing that by the name in
// another case; fields of embedded structs count as the outer struct's;
// members of maps, of interface{} fields and of types that decode
// themselves (json.Unmarshaler) are never unknown. raw that is not JSON
// gives nothing: ParseSpec reports that.
func UnknownFields(raw []byte, prototype any) []string {
	var v any
	if json.Unmarshal(raw, &v) != nil || prototype == nil {
		return nil
	}
	var out []string
	walk(v, reflect.TypeOf(prototype), "", &out)
	slices.Sort(out)
	return out
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// maxUnknownFields bounds the list: a hostile spec may have millions.
const maxUnknownFields = 100

func walk(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if len(*out) >= maxUnknownFields {
				return
			}
			f, found := fieldFor(fields, k)
			p := joinPath(path, k)
			if !found {
				*out = append(*out, p)
				continue
			}
			walk(obj[k], f.typ, p, out)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, e := range obj {
			walk(e, t.Elem(), path+"["+strconv.Quote(k)+"]", out)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 {
			return
		}
		for i, e := range arr {
			walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

func joinPath(path, key string) string {
	if !isPlainKey(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// isPlainKey says whether a member name can be shown as it is in a path.
func isPlainKey(k string) bool {
	if k == "" || len(k) > 100 {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the members encoding/json decodes into struct type t,
// with those of untagged embedded structs promoted, level by level so that
// the shallower of two fields of one name wins, as in encoding/json.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	seen := map[string]bool{}
	level := []reflect.Type{t}
	for depth := 0; len(level) > 0 && depth < 10; depth++ {
		var next []reflect.Type
		for _, t := range level {
			for i := range t.NumField() {
				sf := t.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if sf.Anonymous && name == "" {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						next = append(next, et)
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				if !seen[name] {
					seen[name] = true
					out = append(out, jsonField{name: name, typ: sf.Type})
				}
			}
		}
		level = next
	}
	return out
}

// fieldFor finds the field a member decodes into: by its exact name, else
// by the name in another case, as encoding/json does.
func fieldFor(fields []jsonField, key string) (jsonField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}
