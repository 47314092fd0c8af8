package captcha

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"strconv"

	"github.com/mojocn/base64Captcha"
)

// Request is what a [Generator] is asked to make. Fields may be added.
type Request struct {
	// ID is the challenge ID the Store assigned; wrappers may use it, e.g.
	// a test recorder keeping id -> answer (see package captchatest).
	ID string
	// User is the user the challenge is bound to, "" when unbound.
	User string
}

// Puzzle is a generated challenge and its answer.
type Puzzle struct {
	// Question is shown as text ("" for purely visual challenges).
	Question string
	// Image is the picture as a data URL ("data:image/png;base64,..."),
	// "" for text-only challenges.
	Image string
	// Answer is the expected answer: at most 64 bytes once normalised
	// (surrounding space trimmed, letters case-folded), the form stored in
	// Redis and compared; it is never sent to the client.
	Answer string
}

// Generator makes puzzles. Implement it to plug in slide, click or any other
// challenge whose answer can be written as a short string. A Generator must
// be safe for concurrent use.
type Generator interface {
	Generate(ctx context.Context, r Request) (Puzzle, error)
}

// GeneratorFunc adapts a function to [Generator].
type GeneratorFunc func(ctx context.Context, r Request) (Puzzle, error)

// Generate calls f.
func (f GeneratorFunc) Generate(ctx context.Context, r Request) (Puzzle, error) { return f(ctx, r) }

// Style sets the look of the built-in image generators. Zero fields take
// their defaults.
type Style struct {
	Width  int // pixels, default 240, at least 60
	Height int // pixels, default 80, at least 32
	Noise  int // noise characters behind the text, default 0
	// Lines draws slime and sine lines across the image; default false.
	Lines bool
}

func (s Style) withDefaults() (Style, error) {
	if s.Width == 0 {
		s.Width = 240
	}
	if s.Height == 0 {
		s.Height = 80
	}
	if s.Width < 60 || s.Height < 32 || s.Width > 2000 || s.Height > 1000 || s.Noise < 0 || s.Noise > 200 {
		return s, fmt.Errorf("%w: style %+v out of range", ErrInvalidConfig, s)
	}
	return s, nil
}

func (s Style) lineOptions() int {
	if s.Lines {
		return base64Captcha.OptionShowSlimeLine | base64Captcha.OptionShowSineLine
	}
	return 0
}

// letterAlphabet is the alphabet of [Letters]: letters and digits without
// look-alikes such as 0/O/o, 1/I/l/i, 2/Z/z, 5/S/s, 8/B, 9/g/q, u/v, c/C.
const letterAlphabet = "34679ADEFGHJKMNPRTWXYabdefhjkmnprtwxy"

// Letters returns a Generator of `length` (1..12) random characters from
// the digits and letters without look-alikes (no 0/O/o, 1/I/l/i, 2/Z/z,
// 5/S/s, 8/B, 9/g/q, u/v, c/C), drawn in an image by mojocn/base64Captcha. The answer
// is drawn with crypto/rand. Case does not matter when verifying.
func Letters(length int, style Style) (Generator, error) {
	if length < 1 || length > 12 {
		return nil, fmt.Errorf("%w: letters length %d not in 1..12", ErrInvalidConfig, length)
	}
	st, err := style.withDefaults()
	if err != nil {
		return nil, err
	}
	d := base64Captcha.NewDriverString(st.Height, st.Width, st.Noise, st.lineOptions(), length, letterAlphabet, nil, nil, nil)
	return GeneratorFunc(func(ctx context.Context, _ Request) (Puzzle, error) {
		b := make([]byte, length)
		for i := range b {
			b[i] = letterAlphabet[randInt(len(letterAlphabet))]
		}
		img, err := draw(d, string(b))
		if err != nil {
			return Puzzle{}, err
		}
		return Puzzle{Image: img, Answer: string(b)}, nil
	}), nil
}

// Arithmetic returns a Generator of small sums, differences and products
// ("7+12=?", "15-9=?", "6x8=?", results 0..99) drawn in an image by
// mojocn/base64Captcha; the answer is the decimal result. Operands are
// drawn with crypto/rand. Question is set to the same text for
// accessibility only when withText is true.
func Arithmetic(style Style, withText bool) (Generator, error) {
	st, err := style.withDefaults()
	if err != nil {
		return nil, err
	}
	d := base64Captcha.NewDriverMath(st.Height, st.Width, st.Noise, st.lineOptions(), nil, nil, nil)
	return GeneratorFunc(func(ctx context.Context, _ Request) (Puzzle, error) {
		q, a := arithmetic()
		img, err := draw(d, q)
		if err != nil {
			return Puzzle{}, err
		}
		p := Puzzle{Image: img, Answer: a}
		if withText {
			p.Question = q
		}
		return p, nil
	}), nil
}

func arithmetic() (q, a string) {
	switch randInt(3) {
	case 0:
		x, y := randInt(50), randInt(50)
		return strconv.Itoa(x) + "+" + strconv.Itoa(y) + "=?", strconv.Itoa(x + y)
	case 1:
		x := randInt(90) + 10
		y := randInt(x + 1)
		return strconv.Itoa(x) + "-" + strconv.Itoa(y) + "=?", strconv.Itoa(x - y)
	default:
		x, y := randInt(10), randInt(10)
		return strconv.Itoa(x) + "x" + strconv.Itoa(y) + "=?", strconv.Itoa(x * y)
	}
}

// draw renders text, turning a panic of the drawing library into an error.
func draw(d base64Captcha.Driver, text string) (img string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: draw: %v", ErrGenerator, r)
		}
	}()
	item, err := d.DrawCaptcha(text)
	if err != nil {
		return "", fmt.Errorf("%w: draw: %v", ErrGenerator, err)
	}
	return item.EncodeB64string(), nil
}

func randInt(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		panic("captcha: crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return int(v.Int64())
}
