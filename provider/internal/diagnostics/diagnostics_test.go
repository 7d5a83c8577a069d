package diagnostics

import (
	"errors"
	"testing"
)

// TestFailedSaysWhatAndWhyThenWhatToDo: the order the package doc promises.
func TestFailedSaysWhatAndWhyThenWhatToDo(t *testing.T) {
	d := Failed("Apply Cube Error", "Could not apply the objects of cube default/c", "Check the connection.", errors.New("connection refused"))
	want := "Could not apply the objects of cube default/c: connection refused. Check the connection."
	if d.Detail() != want {
		t.Errorf("detail %q, want %q", d.Detail(), want)
	}
	if d.Summary() != "Apply Cube Error" {
		t.Errorf("summary %q", d.Summary())
	}
	if got := Warning("W", "Something happened.", "").Detail(); got != "Something happened." {
		t.Errorf("warning detail %q", got)
	}
}
