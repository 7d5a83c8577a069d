package cceemu

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The emulator keeps specs as the JSON objects the client sent (numbers as json.Number), so that GET echoes
// every field the SDK knows, including ones the emulator never looks at.

// decodeInto decodes a request body into v, answering the service's malformed-JSON error when it is not JSON.
func decodeInto(body []byte, v any) *apiError {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, CodeMalformedJSON, "the request body is not valid JSON: %v", err)
	}
	return nil
}

// lookup follows a dotted path of object keys, returning nil when any step is missing or not an object.
func lookup(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

func str(m map[string]any, path string) string {
	s, _ := lookup(m, path).(string)
	return s
}

// integer reads a JSON number at path; ok is false when it is absent, and err when it is not an integer.
func integer(m map[string]any, path string) (n int, ok bool, err error) {
	v := lookup(m, path)
	if v == nil {
		return 0, false, nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return 0, true, strconv.ErrSyntax
	}
	i, err := strconv.Atoi(num.String())
	return i, true, err
}

// stripSecrets removes every "adminPassword" from v in place: the service never returns it.
func stripSecrets(v any) {
	switch t := v.(type) {
	case map[string]any:
		delete(t, "adminPassword")
		for _, e := range t {
			stripSecrets(e)
		}
	case []any:
		for _, e := range t {
			stripSecrets(e)
		}
	}
}

// deepCopy copies a decoded JSON value so that answers never alias stored state.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// queryBool parses an optional boolean query parameter as the SDK sends it (strconv.FormatBool).
func queryBool(r *http.Request, name string) *apiError {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil
	}
	if _, err := strconv.ParseBool(v); err != nil {
		return invalidParam("query parameter %s=%q is not a boolean", name, v)
	}
	return nil
}

// page reads pageNo and pageSize. required makes absent or non-positive values an error, as for
// GET /clusters; otherwise they default to 1 and 10 (the SDK's PageNoDefault and PageSizeDefault).
func page(r *http.Request, required bool) (no, size int, e *apiError) {
	read := func(name string, def int) (int, *apiError) {
		v := r.URL.Query().Get(name)
		if v == "" && !required {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (n == 0 && required) {
			return 0, invalidParam("%s=%q must be a positive integer", name, v)
		}
		if n == 0 {
			return def, nil
		}
		return n, nil
	}
	if no, e = read("pageNo", 1); e != nil {
		return 0, 0, e
	}
	size, e = read("pageSize", 10)
	return no, size, e
}

// paginate returns the 1-based page no of size items.
func paginate[T any](items []T, no, size int) []T {
	start := (no - 1) * size
	if start >= len(items) {
		return []T{}
	}
	return items[start:min(start+size, len(items))]
}
