package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// TestVariantRunReport runs the generator against the embedded server
// selling three sizes, buyers choosing 6:3:1: the run passes its checks
// (per size too, and the buyers' histories against SQL, where a size's
// orders are filed under the sale with their lines), and the HTML report
// has a row per size with what it started with, sold and kept, when it
// sold out and its answers by reason.
func TestVariantRunReport(t *testing.T) {
	embeddedOnly(t)
	out := filepath.Join(t.TempDir(), "run.html")
	code, err := run([]string{"-q", "-users", "300", "-variants", "36=5,37=15,38=40", "-variant-weights", "36=6,37=3,38=1",
		"-seed", "27", "-c", "16", "-drain", "2m", "-report", out})
	require.NoError(t, err)
	require.Equal(t, 0, code, "the run found violations")
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	doc, err := html.Parse(f)
	require.NoError(t, err)
	table := byID(t, doc, "variants")
	rows := find(table, func(n *html.Node) bool { return n.Data == "tr" })
	require.Len(t, rows, 4, "a header and three sizes")
	cells := func(r *html.Node) []string {
		var out []string
		for _, c := range find(r, func(n *html.Node) bool { return n.Data == "td" }) {
			out = append(out, text(c))
		}
		return out
	}
	s36, s38 := cells(rows[1]), cells(rows[3])
	require.Len(t, s36, 8)
	assert.Equal(t, []string{"36", "60.0%", "5", "5", "0"}, s36[:5], "size 36: share, initial, sold, left")
	assert.NotEqual(t, "-", s36[6], "size 36 sold out: when")
	assert.Contains(t, s36[7], "sold_out=", "size 36's answers")
	assert.Equal(t, []string{"38", "10.0%", "40"}, s38[:3])
	assert.NotEqual(t, "0", s38[4], "size 38 (1 in 10 buyers) has units left")
	assert.Equal(t, "-", s38[6], "size 38 never sold out")
	assert.False(t, strings.Contains(text(byID(t, doc, "invariants")), "VIOLATED"))
}

// TestVariantWeightsFlag: -variant-weights reaches the load.
func TestVariantWeightsFlag(t *testing.T) {
	cl := parseFlags([]string{"-variant-weights", "36=2, 37=0.5"})
	assert.Equal(t, map[string]float64{"36": 2, "37": 0.5}, cl.lc.VariantWeights)
}
