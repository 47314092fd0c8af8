package risk

import (
	"context"
	"fmt"
)

// Attestor verifies a client's attestation token (Google Play Integrity,
// Apple App Attest, or your own) and reports the verdict in the
// platform-neutral form of [Attestation]; the package doc maps each
// platform's verdict fields onto it. Attest is called with the subject of
// the request, whose AttestToken is set; an error means the attestor could
// not decide (its service down, a timeout), never that the token is bad:
// a bad token is an Attestation with Valid false. An Attestor must be safe
// for concurrent use.
type Attestor interface {
	Attest(ctx context.Context, s Subject) (Attestation, error)
}

// Attestation is an [Attestor]'s verdict on one token, mapped by
// the rule of [NewAttestationRule] to a decision: Valid or App false → [Deny]
// ([ReasonAttestationFailed]); Device false → [Challenge]
// ([ReasonAttestationWeak]); Signals → [Decision.Flags] (a score, the
// request passes).
type Attestation struct {
	// Valid: the token verified (signature, bound to this request's
	// nonce or hash, fresh, not seen before, for your app's ID).
	Valid bool
	// App: the genuine app binary, as you ship it.
	App bool
	// Device: a genuine device that meets integrity (not rooted, not an
	// emulator).
	Device bool
	// Signals are weaker risk signals the verdict carries (reason codes of
	// your choice, e.g. "attest_unlicensed", "attest_capture_app"); they
	// become [Decision.Flags].
	Signals []string
}

// NewAttestationRule returns the [Rule] "attestation", which consults a
// for the subject's attestation token ([Subject.AttestToken]) and maps
// the verdict as [Attestation] says. A subject without a
// token is flagged ([ReasonAttestationMissing] in [Decision.Flags]:
// browsers cannot attest) or, with [AttestationConfig.RequireToken],
// denied. When the attestor fails, the [Checker]'s failure policy decides
// ([WithFailurePolicy]), as for a rule whose Redis is down.
//
// It reads no Redis, so a [Checker] with it has no fused form
// ([Checker.CheckCheck]): run it in a Checker of its own before the fused
// one, or run [Checker.Check]. An attestation token over 16 KiB is denied
// ([ReasonAttestationFailed]) without calling a.
//
// The rule is safe for concurrent use if a is. A nil a fails with
// [ErrInvalidConfig].
func NewAttestationRule(a Attestor, cfg AttestationConfig) (Rule, error) {
	if a == nil {
		return nil, fmt.Errorf("risk: nil attestor: %w", ErrInvalidConfig)
	}
	return &attestRule{a: a, require: cfg.RequireToken}, nil
}

// attestRule is the rule of NewAttestationRule.
type attestRule struct {
	a       Attestor
	require bool
}

// AttestationConfig holds the settings of [NewAttestationRule]; the zero
// value is the default.
type AttestationConfig struct {
	// RequireToken denies a subject without an attestation token (reason
	// [ReasonAttestationMissing]): a sale for app clients only. Default
	// off: such a subject passes with the reason in [Decision.Flags].
	RequireToken bool
}

func (r *attestRule) Name() string { return "attestation" }

// maxAttestTokenLen bounds a token passed to the Attestor (a Play
// Integrity token is a few KB, an App Attest assertion less).
const maxAttestTokenLen = 16 << 10

// Check asks the attestor about s.AttestToken and maps its verdict; an
// attestor error is returned (wrapped) for the Checker's failure policy.
func (r *attestRule) Check(ctx context.Context, s Subject) (Decision, error) {
	switch {
	case s.AttestToken == "" && r.require:
		return Decision{Action: Deny, Reason: ReasonAttestationMissing}, nil
	case s.AttestToken == "":
		return Decision{Flags: []string{ReasonAttestationMissing}}, nil
	case len(s.AttestToken) > maxAttestTokenLen:
		return Decision{Action: Deny, Reason: ReasonAttestationFailed}, nil
	}
	v, err := r.a.Attest(ctx, s)
	if err != nil {
		return Decision{}, fmt.Errorf("risk: attestation: %w", err)
	}
	flags := append([]string(nil), v.Signals...)
	switch {
	case !v.Valid || !v.App:
		return Decision{Action: Deny, Reason: ReasonAttestationFailed, Flags: flags}, nil
	case !v.Device:
		return Decision{Action: Challenge, Reason: ReasonAttestationWeak, Flags: flags}, nil
	}
	return Decision{Flags: flags}, nil
}
