package captcha_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/captcha/captchatest"
)

func ExampleStore() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	gen, err := captcha.Letters(5, captcha.Style{Width: 200, Height: 60})
	if err != nil {
		panic(err)
	}
	// captchatest.Recorder lets this example (and browser tests) learn the
	// answer; production passes gen directly.
	rec := captchatest.NewRecorder(gen)
	store, err := captcha.New(rdb, rec, captcha.WithMaxAttempts(3))
	if err != nil {
		panic(err)
	}

	ch, err := store.Generate(ctx, captcha.GenerateParams{User: "alice"})
	if err != nil {
		panic(err)
	}
	fmt.Println("image:", strings.HasPrefix(ch.Image, "data:image/png;base64,"))
	answer, _ := rec.Answer(ch.ID)

	fmt.Println("wrong:", store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: "nope", User: "alice"}))
	fmt.Println("other user:", store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: answer, User: "bob"}))
	fmt.Println("right, any case:", store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: " " + strings.ToUpper(answer) + " ", User: "alice"}))
	fmt.Println("reused:", errors.Is(store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: answer, User: "alice"}), captcha.ErrNotFound))
	// Output:
	// image: true
	// wrong: captcha: wrong answer (2 attempts left)
	// other user: captcha: challenge bound to another user
	// right, any case: <nil>
	// reused: true
}

func ExampleGeneratorFunc() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	// A text question; a slide captcha would return its image and the
	// target offset, quantised, as the answer.
	quiz := captcha.GeneratorFunc(func(ctx context.Context, r captcha.Request) (captcha.Puzzle, error) {
		return captcha.Puzzle{Question: "What is the capital of France?", Answer: "Paris"}, nil
	})
	store, _ := captcha.New(rdb, quiz)
	ch, _ := store.Generate(context.Background(), captcha.GenerateParams{})
	fmt.Println(ch.Question)
	fmt.Println(store.Verify(context.Background(), captcha.VerifyParams{ID: ch.ID, Answer: "paris", User: ""}))
	// Output:
	// What is the capital of France?
	// <nil>
}

func ExamplePoW() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	keys := []captcha.PoWKey{{ID: "2026-12", Secret: []byte("32 random bytes from a secret store")}}
	pow, err := captcha.NewPoW(rdb, keys, captcha.PoWConfig{MaxNumber: 1000})
	if err != nil {
		panic(err)
	}
	// Serve this JSON at the ALTCHA widget's challenge URL.
	challenge, err := pow.Generate(captcha.GenerateParams{User: "alice"})
	if err != nil {
		panic(err)
	}
	// The widget solves it in the browser and posts the payload; a load
	// generator calls Solve.
	payload, err := captcha.Solve(ctx, challenge)
	if err != nil {
		panic(err)
	}
	fmt.Println("other user:", pow.Verify(ctx, captcha.VerifyParams{Answer: payload, User: "bob"}))
	fmt.Println("alice:", pow.Verify(ctx, captcha.VerifyParams{Answer: payload, User: "alice"}))
	err = pow.Verify(ctx, captcha.VerifyParams{Answer: payload, User: "alice"})
	fmt.Println("replayed:", errors.Is(err, captcha.ErrRefused), err)
	// Output:
	// other user: captcha: challenge bound to another user
	// alice: <nil>
	// replayed: true captcha: challenge not found or expired: pow challenge already redeemed
}
