// Package risk is the gate in front of a flash sale's stock: it
// authenticates buyers, finds their real IP behind proxies, and refuses
// banned, over-eager or device-sharing clients before they reach the stock
// script, with decisions a client can act on (deny, throttle, challenge).
//
// # Building blocks
//
//   - [NewAuth] middleware: bearer token → user ID through a pluggable
//     [Authenticator] ([AuthenticatorFunc]); [SessionStore] is a Redis-backed
//     one (random 256-bit tokens, hashed at rest, TTL, optional sliding
//     expiry, revoke) and [AuthCache] an optional in-process cache in front
//     of any Authenticator. With [AuthCacheConfig.Revocations] and
//     [AuthCache.Run], a
//     [SessionStore.Revoke] on any instance reaches every running cache at
//     once (see "Session revocation" below). The user ID is put in the
//     request context ([UserFrom], [WithUser]).
//   - [IPResolver]: the client IP from trusted proxies' X-Forwarded-For
//     (right-most untrusted hop) or, opt-in, X-Real-IP; headers from
//     untrusted peers are ignored.
//   - [Blacklist]: bans of users, IPs, IP networks and devices with TTL
//     and escalation (first offence base, then ×factor up to a max); bans
//     only grow (a later Add keeps the longer of the two, and a ban key
//     without a TTL is permanent and stays so); one pipelined round trip
//     checks them all. A [KindIP] ban is an address or a CIDR network;
//     a request's address is looked up as exact keys at each configured
//     prefix length ([BlacklistConfig.IPv4Prefixes]: IPv4 /24 and IPv6
//     /64 by default), so a check costs O(prefix lengths), never a scan of
//     the bans.
//   - [Behaviour]: per-user sliding-window counter that challenges above one
//     threshold, throttles above another, and can ban automatically: the
//     user, and with [BehaviourConfig.AutoBlacklistKinds] its device and
//     its IPv6 /64.
//   - [DeviceBinder]: a device belongs to the first user who presents it; any
//     other user is denied or challenged (and the device banned, escalating,
//     with [DeviceBinderConfig.AutoBlacklist]). A user without a device ID
//     is challenged ([ReasonDeviceMissing]), denied
//     ([DeviceBinderConfig.RequireDevice]) or flagged
//     ([DeviceBinderConfig.FlagMissing]): leaving the header out is no way
//     around the binding.
//   - [NewAttestationRule]: a rule over an [Attestor], your verifier of
//     app attestation tokens (see "Attestation" below).
//   - [Checker] composes [Rule]s into a [Decision] (first deny wins,
//     challenges accumulate) and the [NewMiddleware] middleware enforces
//     it over HTTP: 403
//     deny, 429 throttle, 403 "challenge" (configurable), 503 when a
//     dependency failed under fail-closed. Dry-run mode only reports.
//     [Checker.CheckCheck] is Check as a check a composer runs in one
//     script with its other Redis checks (package fused).
//
// # Denials and errors
//
// A refusal is a [Decision], never an error. Errors mean a dependency
// failed (wrapping the go-redis error; [ErrUnavailable] from the
// [Checker]), the configuration was bad ([ErrInvalidConfig], from the
// constructors), an argument was invalid ([ErrInvalidArgument], also for
// a bad user or device ID) or, on the auth path only, a credential did
// not verify ([ErrNoToken], [ErrMalformedToken], [ErrInvalidToken]). Those
// three, and nothing else, wrap the umbrella [ErrRefused]: one
// errors.Is(err, ErrRefused) tells "refused" (401) from "broken" (503) or
// a programming error; a cancelled context is never a refusal.
//
// # Session revocation
//
// [SessionStore.Revoke] deletes the session and, in the same atomic step
// (one script), publishes the token's hash (base64url SHA-256, as in the
// session key; never the token) on the channel "<prefix>risk:session:revoked". An
// [AuthCache] built with [AuthCacheConfig.Revocations] hears it in
// [AuthCache.Run] (subscribed through the store's client) and forgets the
// token at once, so its TTL can be long: a flash sale's opening finds the
// buyers' sessions in memory instead of costing one GET each. Such a cache
// stores entries only while Run is subscribed; it is emptied when Run
// starts, returns or resubscribes after a reconnect (messages published
// meanwhile are lost), and a lookup racing the revocation of its token is
// not cached. A hit never hashes the token (the hash → token index is
// filled on a miss). A session that expires by its own Redis TTL is not
// announced: a cache may accept it for up to its TTL past that expiry.
// Run returns nil when its ctx ends, [ErrRunning] while another Run is
// active and [ErrClosed] after [AuthCache.Close]: the sentinels every
// seckill package shares.
//
// # Options
//
// The three constructors of the request path take functional options, each
// its own type ([CheckerOption], [MiddlewareOption], [AuthOption]), so an
// option that does not apply to a constructor does not compile;
// [WithLogger] and [WithObserver] apply to the Checker and Auth and return
// an [Option], which is both. A nil option is ignored;
// WithLogger(nil) is an error. The other constructors have plain settings
// only and take a settings struct whose zero value is the default
// ([SessionConfig], [BlacklistConfig], [BehaviourConfig],
// [DeviceBinderConfig], [AuthCacheConfig], [IPResolverConfig]). A nil
// collaborator (client, authenticator, checker, rule, logger) or a setting
// out of range fails the constructor with [ErrInvalidConfig].
//
// # IDs
//
// User and device IDs become parts of Redis keys, so they are bounded
// before any command is sent: a user ID is 1..128 bytes
// without braces ([ValidUserID]); a device ID, which comes straight from
// the client, is 1..128 bytes of [A-Za-z0-9._:-] ([ValidDeviceID]). Direct
// calls ([DeviceBinder.Bind], [Blacklist.Add], [Behaviour.Record],
// [SessionStore.Create] …) fail with [ErrInvalidArgument] and write
// nothing; as rules, [Blacklist], [Behaviour] and [DeviceBinder] deny such
// a [Subject] ([ReasonInvalidUser], [ReasonInvalidDevice]; the
// [NewMiddleware] middleware answers 403). IP IDs are canonical addresses.
//
// # Failure policy
//
// When Redis is down the [Checker] follows [WithFailurePolicy]:
// [FailClosed] (default: the request is refused with 503, so overloading
// Redis never opens the gate), [FailOpen] (the failed rule is skipped and
// named in Decision.Degraded) or [FailChallenge] (humans pass a captcha).
// Every failure is reported to the [WithOnFailure] hook and the logger. The
// [NewAuth] middleware answers 503 (not 401) when its Authenticator fails.
//
// # Observing
//
// [WithObserver] (read by [NewChecker] and [NewAuth]) reports to the
// observer shape shared by every seckill package ([observe.Event], [observe.Observer]),
// synchronously, with the caller's ctx: "risk.check" per [Checker.Check]
// (outcome allow, challenge, deny, or error with Err; Name the deciding
// rule; in dry-run mode the would-be action) and "risk.auth" per request
// through the [NewAuth] middleware (ok, missing_token, malformed_token,
// invalid_token, or error when the authenticator failed). See
// [StageCheck].
//
// # Attestation
//
// An [Attestor] verifies a mobile client's attestation token
// ([Subject.AttestToken], header X-Attestation) and answers an
// [Attestation]; the rule of [NewAttestationRule] maps it: Valid or App
// false → [Deny] ([ReasonAttestationFailed]), Device false → [Challenge]
// ([ReasonAttestationWeak]), Signals → [Decision.Flags] (the request
// passes; a caller scores them). No token: a flag
// ([ReasonAttestationMissing]; browsers cannot attest), or a Deny with
// [AttestationConfig.RequireToken]. An Attestor error meets the Checker's
// failure policy. The platforms' verdicts map onto it so:
//
//	Attestation      Google Play Integrity (decoded verdict)              Apple App Attest (server-side check)
//	Valid  (deny)    token decrypted and verified; requestDetails          attestation: certificate chain to Apple's App
//	                 .requestHash (or .nonce) is this request's;           Attestation root, nonce = SHA-256(authData ‖
//	                 .timestampMillis fresh; .requestPackageName yours;    clientDataHash); assertion: signature by the
//	                 the token not seen before                             stored key over this request, counter grown
//	App    (deny)    appIntegrity.appRecognitionVerdict = PLAY_RECOGNIZED  rpIdHash = SHA-256(team ID + "." + bundle ID);
//	                 and packageName, certificateSha256Digest yours        aaguid "appattest" (not "appattestdevelop")
//	Device (challenge) deviceIntegrity.deviceRecognitionVerdict has       true: the key lives in a genuine device's
//	                 MEETS_DEVICE_INTEGRITY or MEETS_STRONG_INTEGRITY      Secure Enclave (a valid attestation says so)
//	Signals (score)  only MEETS_BASIC_INTEGRITY or MEETS_VIRTUAL_INTEGRITY; the receipt's risk metric (attested keys
//	                 accountDetails.appLicensingVerdict != LICENSED;        per device) above your threshold
//	                 environmentDetails.appAccessRiskVerdict with
//	                 UNKNOWN_CAPTURING or UNKNOWN_CONTROLLING;
//	                 playProtectVerdict HIGH_RISK or POSSIBLE_RISK
//
// UNRECOGNIZED_VERSION or UNEVALUATED app verdicts, an empty device
// verdict, a wrong package or app ID, a replayed nonce or a stale
// timestamp are all Valid or App false: a Deny.
//
// # Shared IPs
//
// Thousands of honest buyers can share one corporate or carrier NAT
// address. Nothing in this package denies an IP for being shared: the
// behaviour counter is per user, device binding is per device, and an IP
// is only ever denied after an explicit [Blacklist.Add] / [Blacklist.AddFor]
// by an operator or your own code, or by an automatic ban you opted into
// ([BehaviourConfig.AutoBlacklistKinds] with [KindIP]: an IPv6 client's
// /64, an IPv4 address alone).
//
// # Redis
//
// Needs Redis ≥ 6.2 (GETEX for sliding sessions; SET … KEEPTTL in the
// blacklist script; scripts use TIME and effects replication, default
// since Redis 5). Works with Cluster: each key
// carries one hash tag per subject ("{bl:u:42}", "{u:42}", "{d:abc}") and
// every script touches keys of one tag only; the multi-subject blacklist
// check is a pipeline, which go-redis splits per node. The revocation
// message is published from a script, which Redis Cluster broadcasts to
// every node, so a cache subscribed on any node hears it. Scripts are loaded
// with EVALSHA and fall back to EVAL. The behaviour window uses Redis TIME
// so all app servers agree; ban "until" values use the injected [Clock]
// for reporting only (Redis TTLs enforce bans).
//
// # When not to use it
//
// It is not a WAF, a bot-fingerprinting service or a rate limiter for the
// whole site: put a token bucket (package limiter) in front for raw volume,
// and use risk for per-identity judgement. The session store is a simple
// opaque-token store, not an OAuth server.
//
// # Concurrency
//
// Every type is safe for concurrent use once constructed. Hooks run on the
// request goroutine and never under a lock of this package.
package risk
