package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Body limits: a shopper's request is a few dozen bytes; a catalogue reset
// may list up to a thousand products.
const (
	smallBody = 4 << 10
	resetBody = 256 << 10
)

// decode reads a JSON body of at most limit bytes into v, refusing a wrong
// content type, malformed JSON, unknown fields and trailing data. With
// allowEmpty an empty body is not an error: empty reports it and v is left
// alone.
func decode(c *gin.Context, v any, limit int64, allowEmpty bool) (empty bool, err error) {
	r := c.Request
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return false, errorf("body_too_large", "at most %d bytes", limit)
		}
		if isTimeout(err) {
			return false, &Error{Code: "body_timeout", Err: err}
		}
		return false, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if allowEmpty {
			return true, nil
		}
		return false, errorf("bad_json", "the body is empty")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false, &Error{Code: "unsupported_media_type"}
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return false, errorf("bad_json", "%s", jsonProblem(err))
	}
	// Every body is an object; encoding/json would take null as one left
	// empty, and an empty plan or catalogue is not what null asks for.
	if _, ok := raw.(map[string]any); !ok {
		return false, errorf("bad_json", "the body must be a JSON object")
	}
	if path, found := unknownField(raw, reflect.TypeOf(v), ""); found {
		return false, errorf("unknown_field", "%q is not a field of this request", path)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, errorf("bad_json", "%s", jsonProblem(err))
	}
	return false, nil
}

// jsonProblem says what is wrong with a body in a shopper's words.
func jsonProblem(err error) string {
	if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if e.Field != "" {
			if lo, hi, ok := intRange(e.Type); ok && isInteger(strings.TrimPrefix(e.Value, "number ")) {
				return "field " + e.Field + " is out of range: an integer from " + lo + " to " + hi
			}
			return "field " + e.Field + " must be a JSON " + jsonKind(e.Type)
		}
		return "the body must be a JSON " + jsonKind(e.Type)
	}
	if e, ok := errors.AsType[*json.SyntaxError](err); ok {
		return "syntax error at byte " + itoa(e.Offset)
	}
	return "it could not be parsed"
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}

// intRange is the range of an integer type, in decimal.
func intRange(t reflect.Type) (lo, hi string, ok bool) {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(-1<<(t.Bits()-1), 10), strconv.FormatInt(1<<(t.Bits()-1)-1, 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "0", strconv.FormatUint(1<<t.Bits()-1, 10), true
	}
	return "", "", false
}

// isInteger tells a JSON number with no fraction or exponent, which an
// integer field refuses only for its size.
func isInteger(num string) bool {
	num = strings.TrimPrefix(num, "-")
	return num != "" && strings.Trim(num, "0123456789") == ""
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// unknownField walks a decoded body beside the Go type it is meant for and
// returns the path of the first object key that type has no field for.
// found tells an empty key at the top ("") from none (the fuzzer found
// that one). encoding/json reports unknown fields only as an error string;
// this gives the same answer without matching on one.
func unknownField(v any, t reflect.Type, path string) (unknown string, found bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return "", false
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := field(fields, k)
			if !ok {
				return join(path, k), true
			}
			if p, found := unknownField(val[k], ft, join(path, k)); found {
				return p, true
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return "", false
		}
		for i, e := range val {
			if p, found := unknownField(e, t.Elem(), path+"["+itoa(int64(i))+"]"); found {
				return p, true
			}
		}
	}
	return "", false
}

// field finds the type of the field key names. encoding/json matches names
// as bytes.EqualFold does (so "ſku", with a long s, is "sku"), and so does
// this; lower-casing would not (the fuzzer found it).
func field(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
