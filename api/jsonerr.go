package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// jsonBodyMessage turns an encoding/json decode error of a request body
// decoded into v into a sentence for the client: which field is wrong and
// what it must be (`Field "ttl_s" must be a number, got string.`), with no
// Go type names. v is the pointer the body was decoded into; its JSON field
// names are listed for an unknown field.
func jsonBodyMessage(err error, v any) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "The request body is empty: send a JSON object."
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The request body ends in the middle of its JSON value."
	case errors.As(err, &syn):
		return fmt.Sprintf("The request body is not valid JSON at byte %d: %s.", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("The request body must be %s, got %s.", jsonKind(typ.Type), typ.Value)
		}
		if ft := fieldType(v, typ.Field); ft != nil && (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && ft.Elem() == typ.Type {
			return fmt.Sprintf("Each element of field %q must be %s, got %s.", typ.Field, jsonKind(typ.Type), typ.Value)
		}
		return fmt.Sprintf("Field %q must be %s, got %s.", typ.Field, jsonKind(typ.Type), typ.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if fields := jsonFields(v); len(fields) > 0 {
			return fmt.Sprintf("Unknown field %s: this endpoint reads %s.", name, strings.Join(fields, ", "))
		}
		return fmt.Sprintf("Unknown field %s.", name)
	}
	return sentence("the request body is not valid JSON for this endpoint: " + msg)
}

// jsonKind names what a JSON value decoded into t must be.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// fieldType returns the type of the field at the dotted JSON path in the
// struct v points to, or nil.
func fieldType(v any, path string) reflect.Type {
	t := reflect.TypeOf(v)
	for _, name := range strings.Split(path, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			return nil
		}
		var next reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == name || tag == "" && strings.EqualFold(f.Name, name) {
				next = f.Type
				break
			}
		}
		t = next
	}
	return t
}

// jsonFields returns the quoted JSON field names of the struct v points to.
func jsonFields(v any) []string {
	names := jsonNames(v)
	for i, n := range names {
		names[i] = fmt.Sprintf("%q", n)
	}
	return names
}

// jsonNames returns the JSON field names of the struct v points to, as
// encoding/json names them: the tag's name, else the Go field's.
func jsonNames(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
