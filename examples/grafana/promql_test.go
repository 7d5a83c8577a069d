package grafana

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The metric names a PromQL expression selects, found by a lexer and a walk over its tokens
// (PromQL's own parser would bring the whole Prometheus module in). What the walk knows:
//   - label matchers `{...}` name labels, not metrics, except `__name__="..."`;
//   - a range or subquery `[...]` holds durations and Grafana's interval variables;
//   - a name followed by `(` is a function; aggregations and keywords (by, without, on,
//     ignoring, group_left, group_right, and, or, unless, bool, offset, ...) are not
//     metrics, and the label lists of by/without/on/ignoring/group_* are skipped;
//   - strings (label_replace's arguments, count_values' label) and numbers are skipped;
//   - Grafana's variables ($name, ${name}, ${name:format}, [[name]]) are skipped, except in a
//     metric's place (followed by `{` or `[`), where the metric could not be checked.
// Anything it cannot lex (an unclosed string, bracket or brace, a character PromQL does not
// have) is an error, never a name skipped.

type tokenKind int

const (
	tokName tokenKind = iota
	tokNumber
	tokString
	tokVariable
	tokPunct
)

type token struct {
	kind tokenKind
	text string
}

// keywords are PromQL's words that are neither metrics nor functions; the aggregations among
// them may be followed by a label list or by `(`.
var keywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// labelLists are the keywords followed by a list of label names in parentheses.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isNameStart(r byte) bool {
	return r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}
func isNameChar(r byte) bool { return isNameStart(r) || (r >= '0' && r <= '9') }
func isDigit(r byte) bool    { return r >= '0' && r <= '9' }

// lex splits expr into tokens.
func lex(expr string) ([]token, error) {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unclosed string at %d: %s", i, expr[i:])
			}
			out = append(out, token{tokString, expr[i+1 : j]})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				k := strings.IndexByte(expr[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unclosed variable at %d: %s", i, expr[i:])
				}
				j += k + 1
			} else {
				for j < len(expr) && isNameChar(expr[j]) && expr[j] != ':' {
					j++
				}
				if j == i+1 {
					return nil, fmt.Errorf("a $ that starts no variable at %d", i)
				}
			}
			out = append(out, token{tokVariable, expr[i:j]})
			i = j
		case c == '[' && strings.HasPrefix(expr[i:], "[[") && !strings.HasPrefix(expr[i:], "[[["): // Grafana's old [[variable]]
			k := strings.Index(expr[i:], "]]")
			if k < 0 {
				return nil, fmt.Errorf("unclosed variable at %d: %s", i, expr[i:])
			}
			out = append(out, token{tokVariable, expr[i : i+k+2]})
			i += k + 2
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			// Numbers, hexadecimal numbers and durations (5m, 1h30m, 1e-3).
			j := i
			for j < len(expr) && (isNameChar(expr[j]) || expr[j] == '.') && expr[j] != ':' {
				if (expr[j] == 'e' || expr[j] == 'E') && j+1 < len(expr) && (expr[j+1] == '+' || expr[j+1] == '-') && !strings.HasPrefix(expr[i:], "0x") {
					j++
				}
				j++
			}
			out = append(out, token{tokNumber, expr[i:j]})
			i = j
		case isNameStart(c) && c != ':':
			j := i
			for j < len(expr) && isNameChar(expr[j]) {
				j++
			}
			out = append(out, token{tokName, expr[i:j]})
			i = j
		case strings.ContainsRune("(){}[],+-*/%^@:", rune(c)):
			out = append(out, token{tokPunct, string(c)})
			i++
		case strings.ContainsRune("=!<>", rune(c)):
			j := i + 1
			if j < len(expr) && (expr[j] == '=' || expr[j] == '~') {
				j++
			}
			if expr[i:j] == "!" {
				return nil, fmt.Errorf("a lone ! at %d", i)
			}
			out = append(out, token{tokPunct, expr[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("%q at %d is not PromQL", c, i)
		}
	}
	return out, nil
}

// metricNames returns the metric names expr selects, in order, each once.
func metricNames(expr string) ([]string, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	is := func(i int, text string) bool {
		return i < len(toks) && toks[i].kind == tokPunct && toks[i].text == text
	}
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokName && labelLists[strings.ToLower(t.text)]:
			if is(i+1, "(") {
				end, err := closing(toks, i+1, "(", ")")
				if err != nil {
					return nil, err
				}
				i = end
			}
		case t.kind == tokName && keywords[strings.ToLower(t.text)]:
		case t.kind == tokName && is(i+1, "("): // a function
		case t.kind == tokName:
			add(t.text)
		case t.kind == tokVariable && (is(i+1, "{") || is(i+1, "[")):
			return nil, fmt.Errorf("the variable %s stands where a metric's name would: the metric cannot be checked", t.text)
		case is(i, "{"):
			end, err := closing(toks, i, "{", "}")
			if err != nil {
				return nil, err
			}
			names, err := nameMatchers(toks[i+1 : end])
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				add(n)
			}
			i = end
		case is(i, "["):
			end, err := closing(toks, i, "[", "]")
			if err != nil {
				return nil, err
			}
			i = end
		case is(i, "("):
			depth++
		case is(i, ")"):
			if depth--; depth < 0 {
				return nil, fmt.Errorf("a ) that closes nothing in %s", expr)
			}
		case is(i, "}") || is(i, "]"):
			return nil, fmt.Errorf("a %s that closes nothing in %s", t.text, expr)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%d unclosed ( in %s", depth, expr)
	}
	return out, nil
}

// closing is the index of the token that closes the open one at i.
func closing(toks []token, i int, open, close string) (int, error) {
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].kind != tokPunct {
			continue
		}
		switch toks[j].text {
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %s", open)
}

// nameMatchers reads label matchers (name op "value", ...) and returns the metric names that
// __name__= matchers give.
func nameMatchers(toks []token) ([]string, error) {
	var out []string
	for i := 0; i < len(toks); {
		if toks[i].kind == tokPunct && toks[i].text == "," {
			i++
			continue
		}
		if i+2 >= len(toks) || toks[i].kind != tokName || toks[i+1].kind != tokPunct || toks[i+2].kind != tokString {
			return nil, fmt.Errorf("a label matcher that is not label op \"value\" at %v", toks[i:])
		}
		switch op := toks[i+1].text; op {
		case "=", "!=", "=~", "!~":
			if toks[i].text == "__name__" {
				if op != "=" {
					return nil, fmt.Errorf("__name__%s%q matches metric names by a pattern: the metrics cannot be checked", op, toks[i+2].text)
				}
				out = append(out, toks[i+2].text)
			}
		default:
			return nil, fmt.Errorf("%q is not a label matcher's operator", op)
		}
		i += 3
	}
	return out, nil
}

// TestMetricNames: the walk finds the metrics of every kind of PromQL a dashboard holds, and
// nothing else; what it cannot read is an error.
func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (shard) (rate(cube_keys_total{namespace=~"$namespace", app_kubernetes_io_instance=~"$cube"}[$__rate_interval]))`, []string{"cube_keys_total"}},
		{`histogram_quantile(0.99, sum without (pod, instance) (rate(cube_request_duration_seconds_bucket[5m])))`, []string{"cube_request_duration_seconds_bucket"}},
		{`sum(rate(a_total[1h30m] offset -5m)) BY (le) / on (shard) group_left (version) max(b{x="}"}) > bool 1e-3`, []string{"a_total", "b"}},
		{`count_values("version", cube_dict_info) or vector(0) unless absent(c) and d @ start()`, []string{"cube_dict_info", "c", "d"}},
		{`label_replace(x, "dst", "$1", "src", "(.*)") + {__name__="y", job!="z"} # a comment naming z_total`, []string{"x", "y"}},
		{`rate(x[5m:1m]) * 0x1F + topk(3, x) - y:recorded:rate5m`, []string{"x", "y:recorded:rate5m"}},
		{"max_over_time(m[[[interval]]]) + on() group_right() label_join(e, `dst`, \",\", `a`)", []string{"m", "e"}},
		{`sum(rate(cube_keys_total[${__rate_interval}])) / sum(rate(cube_keys_total[${__rate_interval}]))`, []string{"cube_keys_total"}},
		{`histogram_quantile($quantile, x_bucket)`, []string{"x_bucket"}},
	} {
		got, err := metricNames(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.expr, got, c.want)
		}
	}
	for _, bad := range []string{
		`rate(x[5m]`, `rate(x[5m]))`, `x{a="b"`, `x{a="b}`, `x]`, `sum(x) by (le`, `$metric{a="b"}`, `${metric}[5m]`,
		`{__name__=~"cube_.*"}`, `x{a}`, `x{a=b}`, `x ; y`, `x ! y`, `x{a=<"b"}`, `x{shard="0"} == $`, `x ??? y`,
	} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("%s: read as %q, want an error", bad, got)
		}
	}
}
