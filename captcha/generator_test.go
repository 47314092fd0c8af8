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
	for range 3 {
		p, err := g.Generate(context.Background(), Request{})
		require.NoError(t, err)
		assert.Len(t, p.Answer, 6)
		for _, c := range p.Answer {
			assert.Contains(t, letterAlphabet, string(c))
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
		assert.ErrorIs(t, err, ErrInvalidConfig)
		assert.Error(t, err, bad)
	}
}

func TestArithmetic(t *testing.T) {
	t.Parallel()
	// The question/answer logic, many times (cheap, no image).
	ops := map[byte]int{}
	for range 2000 {
		q, a := arithmetic()
		want, op := evalQuestion(t, q)
		ops[op]++
		assert.Equal(t, strconv.Itoa(want), a, q)
		assert.GreaterOrEqual(t, want, 0, q)
		assert.Less(t, want, 100, q)
	}
	assert.Len(t, ops, 3, "all three operators occur")

	// The generator, rendering an image (slow under -race: twice only).
	g, err := Arithmetic(Style{}, true)
	require.NoError(t, err)
	p, err := g.Generate(context.Background(), Request{})
	require.NoError(t, err)
	want, _ := evalQuestion(t, p.Question)
	assert.Equal(t, strconv.Itoa(want), p.Answer)
	w, h := decodePNG(t, p.Image)
	assert.Equal(t, [2]int{240, 80}, [2]int{w, h})

	g, err = Arithmetic(Style{}, false)
	require.NoError(t, err)
	p, err = g.Generate(context.Background(), Request{})
	require.NoError(t, err)
	assert.Empty(t, p.Question)
	assert.NotEmpty(t, p.Image)
	_, err = Arithmetic(Style{Width: 5000}, false)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Error(t, err)
}

func evalQuestion(t *testing.T, question string) (int, byte) {
	t.Helper()
	q, ok := strings.CutSuffix(question, "=?")
	require.True(t, ok, question)
	for _, op := range []byte{'+', '-', 'x'} {
		if a, b, ok := strings.Cut(q, string(op)); ok {
			x, y := atoi(t, a), atoi(t, b)
			switch op {
			case '+':
				return x + y, op
			case '-':
				return x - y, op
			default:
				return x * y, op
			}
		}
	}
	t.Fatalf("bad question %q", question)
	return 0, 0
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
