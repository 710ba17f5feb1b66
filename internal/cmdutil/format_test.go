package cmdutil

import (
	"bytes"
	"testing"
)

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Score(123.456), "123.5"}, {Score(12.345), "12.35"}, {Score(0.123456), "0.1235"},
		{Num(16), "16"}, {Num(15.5), "15.5"},
		{GB(24576), "25 GB"},
		{Dash(""), "-"}, {Dash("x"), "x"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestWriteTableOffATerminalIsTabSeparated(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, []string{"A", "B"}, [][]string{{"1", "x\x1b[2J"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "A\tB\n1\tx\\x1b[2J\n"; got != want {
		t.Errorf("table %q, want %q (cells made safe)", got, want)
	}
}
