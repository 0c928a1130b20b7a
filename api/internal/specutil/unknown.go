package specutil

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxUnknownFields bounds how many unknown fields one spec's errors name.
const maxUnknownFields = 10

// UnknownFields names every key of raw (a provider spec's JSON) that is no
// field of t, at any depth, as a field error under path. encoding/json
// drops such keys without a word, so a misspelt or foreign field (one
// another provider knows) would be ignored: the server would be made
// without what the spec asks for. Keys are matched as encoding/json
// matches them (exactly, else case-insensitively), so whatever it decodes
// counts as known. Values whose type decodes itself (a time, a quantity)
// are not looked into. raw must be valid JSON.
func UnknownFields(raw []byte, t reflect.Type, path *field.Path, kind string) field.ErrorList {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	var errs field.ErrorList
	unknownIn(v, t, path, kind, &errs)
	return errs
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

func unknownIn(v any, t reflect.Type, path *field.Path, kind string, errs *field.ErrorList) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) || len(*errs) >= maxUnknownFields {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			f, ok := fieldFor(fields, k)
			if !ok {
				if len(*errs) >= maxUnknownFields {
					return
				}
				*errs = append(*errs, field.Forbidden(path.Child(quoted(k)),
					"not a field of "+kind+": it would be ignored; remove it, or correct its spelling"))
				continue
			}
			unknownIn(obj[k], f.typ, path.Child(f.name), kind, errs)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range list {
			unknownIn(e, t.Elem(), path.Index(i), kind, errs)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range sortedKeys(obj) {
			unknownIn(obj[k], t.Elem(), path.Key(quoted(k)), kind, errs)
		}
	}
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields are the JSON names of a struct's fields, those of embedded
// structs without a name of their own (TypeMeta's ",inline") included, as
// encoding/json promotes them.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// fieldFor finds the field a key decodes into: the exact name, else one
// equal under case folding.
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

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// quoted is a key as a path shows it: shortened, and quoted when it holds
// what would break the message's line.
func quoted(k string) string {
	if !Printable(k) {
		return strconv.Quote(Truncate(k))
	}
	return Truncate(k)
}
