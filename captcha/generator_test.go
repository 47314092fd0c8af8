package captcha

import (
	"bytes"
	"context"
	"encoding/base64"
	"image/png"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decodePNG(t *testing.T, dataURL string) (w, h int) {
	t.Helper()
	b64, ok := strings.CutPrefix(dataURL, "data:image/png;base64,")
	require.True(t, ok, dataURL[:min(40, len(dataURL))])
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	return img.Bounds().Dx(), img.Bounds().Dy()
}

func TestLetters(t *testing.T) {
	t.Parallel()
	g, err := Letters(6, Style{Width: 200, Height: 60, Noise: 5, Lines: true})
	require.NoError(t, err)
	seen := map[string]bool{}
	for range 5 {
		p, err := g.Generate(context.Background(), Request{})
		require.NoError(t, err)
		assert.Len(t, p.Answer, 6)
		for _, c := range p.Answer {
			assert.Contains(t, LetterAlphabet, string(c))
		}
		assert.Empty(t, p.Question)
		w, h := decodePNG(t, p.Image)
		assert.Equal(t, [2]int{200, 60}, [2]int{w, h})
		seen[p.Answer] = true
	}
	assert.Greater(t, len(seen), 1, "answers are random")

	for _, bad := range []struct {
		n int
		s Style
	}{{0, Style{}}, {13, Style{}}, {4, Style{Width: 10}}, {4, Style{Height: 8}}, {4, Style{Noise: -1}}} {
		_, err := Letters(bad.n, bad.s)
		assert.Error(t, err, bad)
	}
}

func TestArithmetic(t *testing.T) {
	t.Parallel()
	g, err := Arithmetic(Style{}, true)
	require.NoError(t, err)
	for range 20 {
		p, err := g.Generate(context.Background(), Request{})
		require.NoError(t, err)
		// Check the answer against the question.
		q := strings.TrimSuffix(p.Question, "=?")
		var x, y, want int
		switch {
		case strings.Contains(q, "+"):
			a, b, _ := strings.Cut(q, "+")
			x, y = atoi(t, a), atoi(t, b)
			want = x + y
		case strings.Contains(q, "-"):
			a, b, _ := strings.Cut(q, "-")
			x, y = atoi(t, a), atoi(t, b)
			want = x - y
		default:
			a, b, ok := strings.Cut(q, "x")
			require.True(t, ok, p.Question)
			x, y = atoi(t, a), atoi(t, b)
			want = x * y
		}
		assert.Equal(t, strconv.Itoa(want), p.Answer, p.Question)
		assert.GreaterOrEqual(t, want, 0)
		w, h := decodePNG(t, p.Image)
		assert.Equal(t, [2]int{240, 80}, [2]int{w, h})
	}
	g, err = Arithmetic(Style{}, false)
	require.NoError(t, err)
	p, err := g.Generate(context.Background(), Request{})
	require.NoError(t, err)
	assert.Empty(t, p.Question)
	_, err = Arithmetic(Style{Width: 5000}, false)
	assert.Error(t, err)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
