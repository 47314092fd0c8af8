package risk

import (
	"net/netip"
	"time"
)

// Action is what a [Decision] tells the caller to do. The order matters:
// Deny > Challenge > Allow.
type Action int

const (
	// Allow lets the request through.
	Allow Action = iota
	// Challenge asks the client to prove it is human (e.g. a captcha)
	// before the request is honoured.
	Challenge
	// Deny refuses the request.
	Deny
)

// String returns "allow", "challenge" or "deny".
func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Challenge:
		return "challenge"
	case Deny:
		return "deny"
	default:
		return "unknown"
	}
}

// Reason codes carried by decisions. They are stable strings meant for
// clients, logs and metrics labels.
const (
	ReasonUserBlacklisted   = "user_blacklisted"
	ReasonIPBlacklisted     = "ip_blacklisted"
	ReasonDeviceBlacklisted = "device_blacklisted"
	ReasonTooFrequent       = "too_frequent"      // behaviour: over the deny threshold
	ReasonSuspicious        = "suspicious_rate"   // behaviour: over the flag threshold
	ReasonDeviceShared      = "device_other_user" // device bound to another user
	ReasonDeviceMissing     = "device_missing"    // a user without a device ID where a DeviceBinder runs
	// Attestation (NewAttestationRule).
	ReasonAttestationFailed  = "attestation_failed"  // token invalid, or not the genuine app
	ReasonAttestationWeak    = "attestation_weak"    // the device does not meet integrity
	ReasonAttestationMissing = "attestation_missing" // no token (denied with RequireToken, else a flag)
	ReasonUnavailable        = "unavailable"         // a rule failed under FailChallenge
	ReasonInvalidUser        = "invalid_user"        // Subject.UserID set but not ValidUserID
	ReasonInvalidDevice      = "invalid_device"      // Subject.DeviceID set but not ValidDeviceID
)

// Subject is who and what a request comes from. Empty fields are skipped by
// the rules that need them, but for the device ID of a subject with a user,
// which a [DeviceBinder] never skips ([ReasonDeviceMissing]). A UserID that is set but not [ValidUserID], or a
// DeviceID that is set but not [ValidDeviceID], is denied by [Blacklist],
// [Behaviour] and [DeviceBinder] (reason [ReasonInvalidUser] or
// [ReasonInvalidDevice]) without a Redis command.
type Subject struct {
	UserID   string
	IP       netip.Addr
	DeviceID string
	// AttestToken is the client's attestation token (a Play Integrity
	// token, an App Attest assertion), read only by the rule of [NewAttestationRule];
	// the [NewMiddleware] middleware takes it from the X-Attestation
	// header.
	AttestToken string
}

// Decision is the outcome of a rule or of a [Checker].
type Decision struct {
	// Action is Allow, Challenge or Deny (always Allow in dry-run mode).
	Action Action
	// Reason is the code of the deny, or of the first challenge; empty on a
	// plain allow.
	Reason string
	// Rule names the rule that produced Reason.
	Rule string
	// Challenges lists the reason codes of every challenge met (a Checker
	// keeps evaluating after a challenge; the first deny stops it).
	Challenges []string
	// Flags lists reason codes that were noticed without acting on them
	// (e.g. the behaviour flag threshold under BehaviourConfig.FlagOnly).
	Flags []string
	// Throttled marks a deny caused by request frequency; the middleware
	// answers 429 instead of 403.
	Throttled bool
	// RetryAfter is when trying again may succeed (remaining ban, time until
	// the window frees a slot); 0 if unknown.
	RetryAfter time.Duration
	// Degraded names the rules that failed and were skipped (FailOpen) or
	// turned into a challenge (FailChallenge).
	Degraded []string
	// DryRun reports that enforcement was off: Action is Allow and
	// DryRunAction holds what would have been done.
	DryRun       bool
	DryRunAction Action
}

// FailurePolicy is what a [Checker] does when a rule cannot be evaluated
// because a dependency failed.
type FailurePolicy int

const (
	// FailClosed (the default) makes Check return an error wrapping
	// [ErrUnavailable]; the middleware answers 503. Nobody passes a gate
	// that cannot be checked: scalpers gain nothing by overloading Redis.
	FailClosed FailurePolicy = iota
	// FailOpen skips the failed rule and goes on (Decision.Degraded names
	// it). Use it when availability matters more than the gate.
	FailOpen
	// FailChallenge turns the failed rule into a challenge with reason
	// [ReasonUnavailable]: humans can still buy after a captcha.
	FailChallenge
)

// String returns "fail-closed", "fail-open" or "fail-challenge".
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailChallenge:
		return "fail-challenge"
	default:
		return "unknown"
	}
}
