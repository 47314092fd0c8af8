// Package captcha stores captcha challenges in Redis behind a context-aware,
// error-returning API, and renders letter and arithmetic challenges as PNG
// images through mojocn/base64Captcha.
//
// A [Store] asks its [Generator] for a [Puzzle] (question and/or image plus
// the answer), keeps the normalised answer in one Redis hash per challenge
// with a TTL ([WithTTL], default 2 minutes), and hands the client a
// [Challenge] without the answer. [Store.Verify] runs one Lua script that
// checks and deletes atomically, so a challenge passes at most once even
// when many requests race with the right answer. Answers are compared
// trimmed and case-insensitively (Unicode simple case folding).
//
// Each wrong answer counts; the attempt that reaches the limit
// ([WithMaxAttempts], default 5) deletes the challenge and returns
// [ErrTooManyAttempts]. A challenge may be bound to a user
// ([GenerateParams.User]); another user's Verify fails with [ErrWrongUser]
// without checking the answer or using up an attempt. An expired challenge
// is deleted by Redis and reported as [ErrNotFound]: Redis cannot tell
// "expired" from "never existed", so there is no separate ErrExpired.
//
// # Refused or broken
//
// Every refusal of [Store.Verify] ([ErrNotFound], [ErrWrongAnswer] and its
// [*AttemptsError], [ErrTooManyAttempts], [ErrWrongUser]) wraps the one
// umbrella [ErrRefused], so errors.Is(err, ErrRefused) tells "ask the
// client again" from "the check could not be made". Nothing else wraps it:
// not a Redis failure, [ErrBadReply], [ErrGenerator] or a cancelled
// context (fail closed), nor the caller's mistakes ([ErrInvalidConfig] from
// [New], [Letters] and [Arithmetic]: a nil client, a nil generator, a nil
// clock or an option out of range; [ErrInvalidArgument] from
// [Store.Generate]). Verify takes a [VerifyParams] so that the challenge ID,
// the answer and the user cannot be swapped silently. A nil [Option] is
// ignored.
//
// # Generators
//
// [Letters] and [Arithmetic] draw their answers with crypto/rand and use
// base64Captcha only to draw the picture. Any [Generator] (or
// [GeneratorFunc]) can be plugged in: slide or click captchas work when
// their answer can be written as a short string (e.g. a quantised offset).
// The Generator receives the challenge ID, so a test can wrap it to learn
// answers (package captchatest) while production keeps no such hook.
// Drawing a 240×80 PNG costs several milliseconds of CPU: rate-limit
// [Store.Generate] per user or IP.
//
// # Concurrency and failures
//
// A Store is safe for concurrent use. A Redis failure is a wrapped error
// distinct from every refusal sentinel: treat it as "not verified" (fail
// closed). A failed Verify call does not consume the challenge unless the
// script ran (go-redis may retry after a read timeout; the retry then
// reports [ErrNotFound] for an answer the first run accepted).
//
// # Observing
//
// [WithObserver] reports [Store.Generate] as "captcha.create" (ok, error)
// and [Store.Verify] as "captcha.verify" (ok, not_found, wrong_answer,
// too_many_attempts, wrong_user, error) to the observer shape shared by
// every seckill package ([observe.Event], [observe.Observer]), synchronously, with the
// caller's ctx; "error" carries Err. See [StageCreate].
//
// # Redis
//
// Any Redis 2.6+ with Lua, and Redis Cluster: each script touches one key,
// <prefix>captcha:{<id>}. IDs are 22 URL-safe characters (128 random bits).
package captcha
