package main

import (
	"testing"
)

func TestParsePorts(t *testing.T) {
	t.Parallel()
	ps, err := parsePorts(" 19092, 19093 ,19094")
	if err != nil || len(ps) != 3 || ps[0] != 19092 || ps[2] != 19094 {
		t.Fatalf("parsePorts: %v %v", ps, err)
	}
	for _, bad := range []string{"", ",", "x", "0", "70000", "19092,-1"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) accepted", bad)
		}
	}
}
