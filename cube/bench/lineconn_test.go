package bench

import (
	"bufio"
	"strings"
	"testing"
)

// A value larger than the read buffer is read whole, and what follows it is read next, as
// after a small one.
func TestLineConnValueLargerThanTheBuffer(t *testing.T) {
	large := strings.Repeat("v", 40)
	l := lineConn{br: bufio.NewReaderSize(strings.NewReader("$40\r\n"+large+"\r\n$2\r\nab\r\n"), 16), proto: "test"}
	for _, want := range []string{large, "ab"} {
		if _, err := l.line(); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := l.value(len(want), func(v []byte) { got = string(v) }); err != nil || got != want {
			t.Fatalf("value %q, %v; want %q", got, err, want)
		}
	}
}
