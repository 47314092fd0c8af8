// Package captchatest lets tests and browser end-to-end runs solve
// captchas without weakening production: the test builds the
// [captcha.Store] with a wrapped [captcha.Generator] that remembers each
// answer by challenge ID. Production code never imports this package, and a
// Store built without the wrapper exposes no answer anywhere.
//
//	rec := captchatest.NewRecorder(gen)
//	store, _ := captcha.New(rdb, rec)
//	ch, _ := store.Generate(ctx, captcha.GenerateParams{User: "u1"})
//	answer, _ := rec.Answer(ch.ID)
package captchatest

import (
	"context"
	"sync"

	"github.com/seckillkit/seckill/captcha"
)

// Recorder wraps a Generator and records every answer by challenge ID. It
// is safe for concurrent use.
type Recorder struct {
	gen     captcha.Generator
	mu      sync.Mutex
	answers map[string]string
}

var _ captcha.Generator = (*Recorder)(nil)

// NewRecorder wraps gen.
func NewRecorder(gen captcha.Generator) *Recorder {
	return &Recorder{gen: gen, answers: map[string]string{}}
}

// Generate calls the wrapped Generator and records the answer.
func (r *Recorder) Generate(ctx context.Context, req captcha.Request) (captcha.Puzzle, error) {
	p, err := r.gen.Generate(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.answers[req.ID] = p.Answer
		r.mu.Unlock()
	}
	return p, err
}

// Answer returns the answer of challenge id, if it was generated through r.
func (r *Recorder) Answer(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.answers[id]
	return a, ok
}

// Fixed returns a Generator whose every puzzle is the text question with
// the given answer and no image: deterministic, for tests only.
func Fixed(question, answer string) captcha.Generator {
	return captcha.GeneratorFunc(func(context.Context, captcha.Request) (captcha.Puzzle, error) {
		return captcha.Puzzle{Question: question, Answer: answer}, nil
	})
}
