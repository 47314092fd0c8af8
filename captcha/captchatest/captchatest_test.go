package captchatest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/captcha/captchatest"
	"github.com/seckillkit/seckill/internal/testenv"
)

func TestRecorderSolves(t *testing.T) {
	t.Parallel()
	gen, err := captcha.Letters(5, captcha.Style{})
	require.NoError(t, err)
	rec := captchatest.NewRecorder(gen)
	store, err := captcha.New(testenv.Redis(t), rec, captcha.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	ch, err := store.Generate(ctx, captcha.GenerateParams{User: "u1"})
	require.NoError(t, err)
	a, ok := rec.Answer(ch.ID)
	require.True(t, ok)
	assert.Len(t, a, 5)
	_, ok = rec.Answer("nope")
	assert.False(t, ok)
	require.NoError(t, store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: a, User: "u1"}))
}

func TestFixed(t *testing.T) {
	t.Parallel()
	store, err := captcha.New(testenv.Redis(t), captchatest.Fixed("type TEST", "TEST"), captcha.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	ch, err := store.Generate(ctx, captcha.GenerateParams{})
	require.NoError(t, err)
	assert.Equal(t, "type TEST", ch.Question)
	assert.Empty(t, ch.Image)
	require.NoError(t, store.Verify(ctx, captcha.VerifyParams{ID: ch.ID, Answer: " test ", User: "anyone"}))
}
