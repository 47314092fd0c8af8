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
// # Proof of work
//
// A [PoW] ([NewPoW]) issues and verifies proof-of-work challenges in
// ALTCHA's open v1 format, so ALTCHA's browser widget (releases before
// 3.0; widget 3 speaks ALTCHA's PoW v2) solves them invisibly before the
// buy. What was matched, from ALTCHA's sources (altcha-org/altcha-lib
// lib/index.ts and lib/types.ts, altcha-org/altcha-lib-go v1/altcha.go):
//
//   - the challenge JSON {algorithm:"SHA-256", challenge, maxnumber, salt,
//     signature}, with challenge = hex(SHA-256(salt + decimal number)) for
//     a secret number drawn from 0..maxnumber and signature =
//     hex(HMAC-SHA256(key, challenge)), the hex string being the HMAC's
//     message;
//   - the salt's URL-query parameters, "?expires=<Unix seconds>" among
//     them (the widget reads it), and the '&' altcha-lib-go appends as the
//     last byte so digits of the number cannot be spliced into the salt;
//     expired means now > expires, as there;
//   - the payload the widget posts, base64(JSON{algorithm, challenge,
//     number, salt, signature, took}) (btoa(JSON.stringify(…))), which
//     [Solve] also writes.
//
// Beyond ALTCHA: the salt also names the signing key (k=, so keys rotate
// like token.Signer's, [PoW.SetKeys]) and, for a bound challenge, the user
// (u=, query-escaped; another user's [PoW.Verify] fails with
// [ErrWrongUser]); its first 22 bytes are the challenge ID. The salt is
// parsed strictly — exactly the parameters [PoW.Generate] writes, ending
// in '&' — and the number must be a JSON integer, so neither splice
// (altcha-lib 2.10.0's fix: a salt cut at an earlier '&' with its rest sent
// in a string number) gets through. A solution passes once: the first
// success sets a Redis key named by the challenge's hash (SET NX in one
// script, one key, so any Cluster works) that lives until the challenge
// has expired on every server ([PoWConfig.MaxNodeSkew]); a replay is
// [ErrNotFound].
//
// Verify's checks before Redis (base64, the JSON fields, the strict salt,
// two SHA-256 and one HMAC, the expiry by the injected clock) cost the same
// whatever the challenge's cost and allocate nothing (the buffers live in
// a sync.Pool, like token.Signer's). The cost is [PoWConfig.MaxNumber]
// (default 100000: a solver computes half of it on average, 10–20 ms
// in Go on one core, more in a browser) or [GenerateParams.MaxNumber] per
// challenge, e.g. higher for a client risk distrusts. [Solve] is the
// widget's loop in Go, for load generators and tests.
//
// # Concurrency and failures
//
// A Store and a PoW are safe for concurrent use. A Redis failure is a
// wrapped error distinct from every refusal sentinel: treat it as "not
// verified" (fail closed). A failed Verify call does not consume the challenge unless the
// script ran (go-redis may retry after a read timeout; the retry then
// reports [ErrNotFound] for an answer the first run accepted).
//
// # Observing
//
// [WithObserver] reports [Store.Generate] as "captcha.create" (ok, error)
// and [Store.Verify] as "captcha.verify" (ok, not_found, wrong_answer,
// too_many_attempts, wrong_user, error) to the observer shape shared by
// every seckill package ([observe.Event], [observe.Observer]), synchronously, with the
// caller's ctx; "error" carries Err. See [StageCreate]. A [PoW] reports
// [PoW.Verify] as "captcha.verify" with Name "pow" when
// [PoWConfig.Observer] is set (ok, not_found, wrong_answer, wrong_user,
// error).
//
// # Redis
//
// Any Redis 2.6.12+ with Lua, and Redis Cluster: each script touches one
// key, <prefix>captcha:{<id>} for a [Store], <prefix>captcha:pow:{<SHA-256
// of the challenge, hex>} for a [PoW]. IDs are 22 URL-safe characters (128
// random bits).
package captcha
