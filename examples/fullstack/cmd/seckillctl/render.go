package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// node is a JSON value that keeps the order of object fields.
type node struct {
	obj    []field // object, in the server's order
	arr    []node  // array
	scalar string  // anything else, as text
	kind   byte    // 'o', 'a' or 's'
}

type field struct {
	key string
	val node
}

func parse(data []byte) (node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return parseValue(dec)
}

func parseValue(dec *json.Decoder) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return node{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := node{kind: 'o'}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return node{}, err
				}
				v, err := parseValue(dec)
				if err != nil {
					return node{}, err
				}
				n.obj = append(n.obj, field{key: fmt.Sprint(k), val: v})
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := node{kind: 'a'}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return node{}, err
				}
				n.arr = append(n.arr, v)
			}
			_, err := dec.Token()
			return n, err
		}
	case nil:
		return node{kind: 's', scalar: "-"}, nil
	}
	return node{kind: 's', scalar: fmt.Sprint(tok)}, nil
}

func (n node) get(key string) (node, bool) {
	for _, f := range n.obj {
		if f.key == key {
			return f.val, true
		}
	}
	return node{}, false
}

// text is a one-cell rendering of n.
func (n node) text() string {
	switch n.kind {
	case 's':
		return n.scalar
	case 'a':
		parts := make([]string, len(n.arr))
		for i, v := range n.arr {
			parts[i] = v.text()
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ",")
	}
	parts := make([]string, len(n.obj))
	for i, f := range n.obj {
		parts[i] = f.key + "=" + f.val.text()
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// renderTable prints an answer for people: a before/after answer as three
// columns, lists of objects as tables, everything else as key/value lines.
func renderTable(w io.Writer, data []byte) error {
	n, err := parse(data)
	if err != nil {
		return fmt.Errorf("render answer: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	before, okB := n.get("before")
	after, okA := n.get("after")
	if n.kind == 'o' && okB && okA && (before.kind == 'o' || after.kind == 'o') {
		renderChange(tw, before, after)
		for _, f := range n.obj {
			if f.key != "before" && f.key != "after" {
				fmt.Fprintf(tw, "%s\t%s\n", f.key, f.val.text())
			}
		}
		return tw.Flush()
	}
	var tables []field
	var kv bytes.Buffer
	tw = tabwriter.NewWriter(&kv, 0, 4, 2, ' ', 0)
	renderKV(tw, "", n, &tables)
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := w.Write(kv.Bytes()); err != nil {
		return err
	}
	for i, t := range tables {
		if i > 0 || kv.Len() > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s:\n", t.key)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		renderRows(tw, t.val)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func renderChange(tw io.Writer, before, after node) {
	fmt.Fprintf(tw, "FIELD\tBEFORE\tAFTER\n")
	var keys []string
	seen := map[string]bool{}
	for _, x := range []node{before, after} {
		for _, f := range x.obj {
			if !seen[f.key] {
				seen[f.key] = true
				keys = append(keys, f.key)
			}
		}
	}
	if len(keys) == 0 {
		fmt.Fprintf(tw, "-\t%s\t%s\n", before.text(), after.text())
	}
	for _, k := range keys {
		b, okb := before.get(k)
		a, oka := after.get(k)
		bt, at := "-", "-"
		if okb {
			bt = b.text()
		}
		if oka {
			at = a.text()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, bt, at)
	}
}

// renderKV prints n's scalar leaves as "path value" lines and collects its
// arrays of objects, to be printed as tables after.
func renderKV(tw io.Writer, prefix string, n node, tables *[]field) {
	switch {
	case n.kind == 'o':
		for _, f := range n.obj {
			renderKV(tw, join(prefix, f.key), f.val, tables)
		}
	case n.kind == 'a' && len(n.arr) > 0 && n.arr[0].kind == 'o':
		*tables = append(*tables, field{key: prefix, val: n})
	default:
		fmt.Fprintf(tw, "%s\t%s\n", prefix, n.text())
	}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// renderRows prints an array of objects as a table: one column per key
// with a scalar value in any row (nested objects are left to -o json).
func renderRows(tw io.Writer, n node) {
	var cols []string
	seen := map[string]bool{}
	for _, row := range n.arr {
		for _, f := range row.obj {
			if f.val.kind == 's' && !seen[f.key] {
				seen[f.key] = true
				cols = append(cols, f.key)
			}
		}
	}
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, row := range n.arr {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = "-"
			if v, ok := row.get(c); ok {
				cells[i] = v.text()
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
}
