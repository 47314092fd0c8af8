package risk

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is the kind of subject a ban applies to.
type Kind string

// Kinds of blacklisted subject.
const (
	KindUser   Kind = "u"
	KindIP     Kind = "ip"
	KindDevice Kind = "d"
)

func (k Kind) reason() string {
	switch k {
	case KindIP:
		return ReasonIPBlacklisted
	case KindDevice:
		return ReasonDeviceBlacklisted
	default:
		return ReasonUserBlacklisted
	}
}

// Ban describes an active ban.
type Ban struct {
	Kind Kind
	ID   string
	// Reason is the code given when the ban was added.
	Reason string
	// Offence is the subject's offence number within the offence memory
	// (1 for a first offence).
	Offence int64
	// Until is when the ban ends (as recorded with the injected clock;
	// Redis' TTL enforces it). Zero for a permanent ban.
	Until time.Time
	// Duration is the length of the ban as set (0 when read by
	// [Blacklist.Banned], and for a permanent ban).
	Duration time.Duration
	// Permanent is set for a ban without an end: a ban key without a TTL,
	// written by hand (SET … without EX) or by an older version. Add and
	// AddFor never put an end on a permanent ban.
	Permanent bool
}

// Blacklist bans users, IPs and devices for a time, escalating with repeat
// offences: the n-th offence within the offence memory bans for
// base·factor^(n-1), capped at max ([BlacklistConfig]).
// By default the first ban lasts 1 minute, each further offence doubles
// it (factor 2) and no ban from [Blacklist.Add] exceeds 24 hours: offences
// 1 to 11 ban for 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 and 1024 minutes
// (17h04m), the 12th and every later one for 24 hours. Offences are
// remembered for 7 days after the latest one (a quiet week starts over at
// 1 minute). [Blacklist.AddFor] bypasses the escalation.
// Bans only grow: an offence while a longer ban is active keeps that ban,
// and a ban key without a TTL (set by hand, or by an older version) is
// permanent and stays permanent until [Blacklist.Remove].
//
// [Blacklist.List] lists the current bans of a kind from an index that
// Add, AddFor, Remove and Reset maintain. A ban written by an older
// version of this package, or by hand, has no index entry and is not
// listed (it is still enforced; its next Add or AddFor lists it).
//
// As a [Rule] it denies a [Subject] whose user, IP (its address or one of
// its networks, [BlacklistConfig.IPv4Prefixes]) or device is banned,
// checking them all in one pipelined round trip. The IP part only ever
// denies an IP or network that was added explicitly (by an operator or
// your own code) or by an automatic ban you opted into
// ([BehaviourConfig.AutoBlacklistKinds]): by default nothing in this
// package bans an IP automatically, because thousands of honest users can
// share one corporate or carrier NAT address.
//
// A Blacklist is safe for concurrent use.
type Blacklist struct {
	rdb Client
	o   options
}

// BlacklistConfig holds the settings of [NewBlacklist]; the zero value is
// the default, and each zero field keeps its default.
type BlacklistConfig struct {
	// KeyPrefix prefixes every Redis key. Default "seckill:".
	KeyPrefix string
	// Clock gives the Until of the bans [Blacklist.Add] reports. Default:
	// the system clock (ban expiry itself is the Redis key's TTL).
	Clock Clock
	// BanBase, BanMax and BanFactor set how [Blacklist.Add] grows bans:
	// the first offence within OffenceMemory bans for BanBase, each
	// further one multiplies the ban by BanFactor, never beyond BanMax.
	// Default 1m, 24h, factor 2 (1m, 2m, 4m, … 24h). They must give
	// BanBase >= 1ms, BanMax >= BanBase and BanFactor >= 1.
	BanBase, BanMax time.Duration
	BanFactor       int
	// OffenceMemory is how long past offences count towards escalation
	// (refreshed at each offence). Default 7 days; at least 1ms.
	OffenceMemory time.Duration
	// IPv4Prefixes and IPv6Prefixes are the network prefix lengths
	// (CIDR) a [KindIP] ban may cover besides a single address, and so the
	// ones [Blacklist.Check] looks a request's address up at: its own
	// address (/32, /128) always, then its network at each of these
	// lengths, each one exact GET. Default: IPv4 /24, IPv6 /64 (one
	// subscriber's LAN, and the unit of automatic IP bans, see
	// [BehaviourConfig.AutoBlacklistKinds]). At most 4 each: IPv4 1..32,
	// IPv6 1..128 (a full-length one is the address itself). A non-nil
	// empty slice turns that family's network bans off.
	IPv4Prefixes, IPv6Prefixes []int
}

// maxPrefixes bounds BlacklistConfig.IPv4Prefixes and IPv6Prefixes.
const maxPrefixes = 4

// prefixLens is a family's configured prefix lengths: nil keeps def,
// sorted longest first, without duplicates and without the full length
// (the address itself, always checked).
func prefixLens(v []int, def []int, full int) ([]int, bool) {
	if v == nil {
		return def, true
	}
	if len(v) > maxPrefixes {
		return nil, false
	}
	out := make([]int, 0, len(v))
	for _, l := range v {
		if l < 1 || l > full {
			return nil, false
		}
		if l < full && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b int) int { return b - a })
	return out, true
}

// NewBlacklist returns a Blacklist with the settings of cfg. A nil client
// or a setting out of range fails with [ErrInvalidConfig].
func NewBlacklist(rdb Client, cfg BlacklistConfig) (*Blacklist, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidConfig)
	}
	o := defaultOptions()
	o.setCommon(cfg.KeyPrefix, cfg.Clock, nil)
	o.banBase = orDefault(cfg.BanBase, o.banBase)
	o.banMax = orDefault(cfg.BanMax, o.banMax)
	o.banFactor = orDefault(cfg.BanFactor, o.banFactor)
	o.offenceMemory = orDefault(cfg.OffenceMemory, o.offenceMemory)
	if o.banBase < time.Millisecond || o.banMax < o.banBase || o.banFactor < 1 {
		o.fail("escalation needs BanBase >= 1ms, BanMax >= BanBase, BanFactor >= 1")
	}
	if o.offenceMemory < time.Millisecond {
		o.fail("offence memory must be >= 1ms")
	}
	var ok4, ok6 bool
	o.net4, ok4 = prefixLens(cfg.IPv4Prefixes, []int{24}, 32)
	o.net6, ok6 = prefixLens(cfg.IPv6Prefixes, []int{64}, 128)
	if !ok4 || !ok6 {
		o.fail("IPv4Prefixes must be at most 4 of 1..32, IPv6Prefixes at most 4 of 1..128")
	}
	if o.err != nil {
		return nil, o.err
	}
	return &Blacklist{rdb: rdb, o: o}, nil
}

// Name returns "blacklist".
func (b *Blacklist) Name() string { return "blacklist" }

// subjectID validates kind and id and returns the id as stored: user and
// device ids must be [ValidUserID] / [ValidDeviceID] (else [ErrInvalidArgument]);
// IP ids are canonicalised ("::ffff:10.0.0.1" and "10.0.0.1" are one
// subject, IPv6 in its compressed form, at most 45 bytes) so bans added by
// hand match the [IPResolver]'s output; a network ("203.0.113.0/24",
// "2001:db8:1:2::/64") is masked and printed in CIDR form, and a
// full-length one is its address ("10.0.0.1/32" is "10.0.0.1").
func subjectID(kind Kind, id string) (string, error) {
	switch kind {
	case KindUser:
		return id, checkUserID(id)
	case KindDevice:
		return id, checkDeviceID(id)
	case KindIP:
		if id == "" {
			return "", fmt.Errorf("risk: empty ip: %w", ErrInvalidArgument)
		}
		if strings.IndexByte(id, '/') >= 0 {
			p, ok := parseNet(id)
			if !ok {
				return "", fmt.Errorf("risk: ip network %s: %w", describeID(id, "an address/prefix length"), ErrInvalidArgument)
			}
			return netID(p), nil
		}
		a, ok := parseHop(id)
		if !ok {
			if len(id) > 64 {
				return "", fmt.Errorf("risk: ip of %d bytes: %w", len(id), ErrInvalidArgument)
			}
			return "", fmt.Errorf("risk: ip %q: %w", id, ErrInvalidArgument)
		}
		return a.String(), nil
	}
	return "", fmt.Errorf("risk: unknown kind %.16q: %w", kind, ErrInvalidArgument)
}

// Add records an offence of the subject and bans it for the escalated
// duration. Bans only grow: the result is the longer of the existing ban
// and the new one (atomically, in one script), so an existing longer ban
// keeps its end and a permanent ban (a ban key without a TTL, set by hand)
// stays permanent ([Ban.Permanent]).
//
// The ban is then entered in the kind's index ([Blacklist.List]), a second
// round trip (the index lives in another Cluster slot). If that step
// fails, Add returns the ban together with the error: the ban is in force
// but not listed until the subject's next Add or AddFor (an Add is not
// idempotent: a retry records another offence).
func (b *Blacklist) Add(ctx context.Context, kind Kind, id, reason string) (Ban, error) {
	return b.add(ctx, kind, id, reason, 0)
}

// AddFor records an offence and bans the subject for exactly d (or longer
// if a longer or permanent ban is active: as [Blacklist.Add], it never
// shortens a ban), bypassing escalation. The offence still counts towards
// later escalations.
func (b *Blacklist) AddFor(ctx context.Context, kind Kind, id, reason string, d time.Duration) (Ban, error) {
	if d < time.Millisecond {
		return Ban{}, fmt.Errorf("risk: ban duration %v: %w", d, ErrInvalidArgument)
	}
	return b.add(ctx, kind, id, reason, d)
}

func (b *Blacklist) add(ctx context.Context, kind Kind, id, reason string, fixed time.Duration) (Ban, error) {
	id, err := subjectID(kind, id)
	if err != nil {
		return Ban{}, err
	}
	if err := b.checkNet(kind, id); err != nil {
		return Ban{}, err
	}
	if reason == "" {
		reason = kind.reason()
	}
	now := b.o.clock.Now()
	keys := []string{banKey(b.o.prefix, kind, id), offenceKey(b.o.prefix, kind, id)}
	res, err := blacklistAddScript.Run(ctx, b.rdb, keys,
		b.o.banBase.Milliseconds(), b.o.banMax.Milliseconds(), b.o.banFactor,
		b.o.offenceMemory.Milliseconds(), now.UnixMilli(), reason, fixed.Milliseconds()).Int64Slice()
	if err != nil {
		return Ban{}, fmt.Errorf("risk: blacklist add %s:%s: %w", kind, id, err)
	}
	if len(res) != 3 {
		return Ban{}, fmt.Errorf("risk: blacklist add: %w: %v", ErrBadReply, res)
	}
	ban := Ban{Kind: kind, ID: id, Reason: reason, Offence: res[0]}
	end := "+inf"
	if res[1] < 0 {
		ban.Permanent = true
	} else {
		ban.Duration, ban.Until = time.Duration(res[1])*time.Millisecond, time.UnixMilli(res[2])
		end = strconv.FormatInt(res[2], 10)
	}
	// After the ban, never before: a Remove deletes the index entry before
	// the ban key, so whichever order they interleave in, a ban key that
	// exists at the end has its entry (see List).
	err = blacklistIndexScript.Run(ctx, b.rdb, banIndexKeys(b.o.prefix, kind),
		"add", now.UnixMilli(), id, end).Err()
	if err != nil {
		return ban, fmt.Errorf("risk: blacklist add %s:%s: the ban is in force, its index entry failed: %w", kind, id, err)
	}
	return ban, nil
}

// unindex removes the subject from its kind's index; Remove and Reset call
// it before they delete the ban key.
func (b *Blacklist) unindex(ctx context.Context, kind Kind, id string) error {
	return blacklistIndexScript.Run(ctx, b.rdb, banIndexKeys(b.o.prefix, kind),
		"del", b.o.clock.Now().UnixMilli(), id).Err()
}

// Remove lifts the subject's ban and removes it from the index. Its offence
// count is kept, so a new offence escalates from where it was; use
// [Blacklist.Reset] to forget it too. Removing an unbanned subject is a
// no-op.
func (b *Blacklist) Remove(ctx context.Context, kind Kind, id string) error {
	id, err := subjectID(kind, id)
	if err != nil {
		return err
	}
	if err := b.unindex(ctx, kind, id); err != nil {
		return fmt.Errorf("risk: blacklist remove %s:%s: %w", kind, id, err)
	}
	if err := b.rdb.Del(ctx, banKey(b.o.prefix, kind, id)).Err(); err != nil {
		return fmt.Errorf("risk: blacklist remove %s:%s: %w", kind, id, err)
	}
	return nil
}

// Reset lifts the subject's ban, removes it from the index and forgets its
// offences.
func (b *Blacklist) Reset(ctx context.Context, kind Kind, id string) error {
	id, err := subjectID(kind, id)
	if err != nil {
		return err
	}
	if err := b.unindex(ctx, kind, id); err != nil {
		return fmt.Errorf("risk: blacklist reset %s:%s: %w", kind, id, err)
	}
	// Both keys share a hash tag: one DEL is fine on a Cluster.
	if err := b.rdb.Del(ctx, banKey(b.o.prefix, kind, id), offenceKey(b.o.prefix, kind, id)).Err(); err != nil {
		return fmt.Errorf("risk: blacklist reset %s:%s: %w", kind, id, err)
	}
	return nil
}

// Banned reports whether the subject is banned, and the ban.
func (b *Blacklist) Banned(ctx context.Context, kind Kind, id string) (Ban, bool, error) {
	id, err := subjectID(kind, id)
	if err != nil {
		return Ban{}, false, err
	}
	v, err := b.rdb.Get(ctx, banKey(b.o.prefix, kind, id)).Result()
	if errors.Is(err, redis.Nil) {
		return Ban{}, false, nil
	}
	if err != nil {
		return Ban{}, false, fmt.Errorf("risk: blacklist check %s:%s: %w", kind, id, err)
	}
	ban, err := parseBan(kind, id, v)
	if err != nil {
		// Banned all the same (the key exists); the metadata is unreadable.
		return Ban{Kind: kind, ID: id}, true, nil
	}
	return ban, true, nil
}

// maxListLimit bounds one page of [Blacklist.List].
const maxListLimit = 1000

// List returns one page of the current bans of kind, in lexical order of
// their IDs: up to limit (1..1000) bans with an ID after after ("" starts
// at the beginning), and the cursor to pass as after for the next page,
// "" when there is none. It costs one script on the kind's index (which
// first prunes up to 128 ended entries) and one pipeline of GETs of the
// page's ban keys. Each ban that exists through the whole paging is
// returned exactly once; one added or lifted meanwhile may or may not be.
// A page may hold fewer than limit bans even before the end (an entry
// whose ban key is gone, e.g. expired, is skipped): page on until the
// cursor is "". Ban.Duration is 0, as with [Blacklist.Banned].
//
// Only bans written by Add and AddFor of this version are listed: a ban
// key written by an older version or by hand has no index entry (it is
// enforced all the same; its next Add or AddFor enters it).
//
// The index is two sorted sets per kind under the hash tag {bl:<kind>}
// (the ban keys have one tag per subject, so the index cannot share their
// slot, and one script cannot write both on a Cluster). It stays sound
// without that atomicity because the ban key is the truth and the order
// of the steps is fixed: Add writes the ban, then the entry; Remove and
// Reset delete the entry, then the ban. So a ban key that exists has an
// entry (a Remove racing an Add can only leave an entry without a ban,
// which List skips and pruning drops at its end), and List reads every
// ban key it returns. Entries are pruned when their end (by the injected
// clock, as [Ban.Until]) has passed, on every index write and read; hosts
// whose clocks disagree by d may drop a ban from the list up to d before
// Redis lifts it. The per-kind keys take only ban writes and listings,
// never the per-request [Blacklist.Check], so one slot per kind is no hot
// spot. An invalid kind, a limit out of range or an after longer than
// 128 bytes fails with [ErrInvalidArgument].
func (b *Blacklist) List(ctx context.Context, kind Kind, after string, limit int) ([]Ban, string, error) {
	if kind != KindUser && kind != KindIP && kind != KindDevice {
		return nil, "", fmt.Errorf("risk: unknown kind %.16q: %w", kind, ErrInvalidArgument)
	}
	if limit < 1 || limit > maxListLimit {
		return nil, "", fmt.Errorf("risk: blacklist list limit %d, want 1..%d: %w", limit, maxListLimit, ErrInvalidArgument)
	}
	if len(after) > maxIDLen {
		return nil, "", fmt.Errorf("risk: blacklist list cursor of %d bytes: %w", len(after), ErrInvalidArgument)
	}
	res, err := blacklistIndexScript.Run(ctx, b.rdb, banIndexKeys(b.o.prefix, kind),
		"list", b.o.clock.Now().UnixMilli(), after, limit).StringSlice()
	if err != nil {
		return nil, "", fmt.Errorf("risk: blacklist list %s: %w", kind, err)
	}
	if len(res) < 1 || len(res) > limit+1 {
		return nil, "", fmt.Errorf("risk: blacklist list: %w: %d items", ErrBadReply, len(res))
	}
	next, ids := res[0], res[1:]
	if len(ids) == 0 {
		return nil, next, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, banKey(b.o.prefix, kind, id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", fmt.Errorf("risk: blacklist list %s: %w", kind, err)
	}
	bans := make([]Ban, 0, len(ids))
	for i, id := range ids {
		v, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // lifted or expired since it was indexed
		case err != nil:
			return nil, "", fmt.Errorf("risk: blacklist list %s: %w", kind, err)
		}
		ban, err := parseBan(kind, id, v)
		if err != nil {
			ban = Ban{Kind: kind, ID: id} // banned all the same, as in Banned
		}
		bans = append(bans, ban)
	}
	return bans, next, nil
}

// Check denies s if its user, IP (its address, then its networks at the
// configured prefix lengths, longest first: [BlacklistConfig.IPv4Prefixes])
// or device is banned (in that order of precedence), in one pipelined
// round trip. Each subject is one exact key, so a check costs at most 2 +
// the family's prefix lengths (4 by default: user, address, /24 or /64,
// device) GETs, whatever the number of bans: O(1) in the bans, O(k) in the
// configured lengths. Empty fields are skipped; an invalid user or device
// ID is denied ([ReasonInvalidUser], [ReasonInvalidDevice]) without a
// Redis command.
func (b *Blacklist) Check(ctx context.Context, s Subject) (Decision, error) {
	if d, bad := invalidSubject(s, true, true); bad {
		return d, nil
	}
	items, n := b.banItems(s)
	if n == 0 {
		return Decision{}, nil
	}
	var vals [maxBanItems]string
	var found [maxBanItems]bool
	if n == 1 {
		v, err := b.rdb.Get(ctx, banKey(b.o.prefix, items[0].kind, items[0].id)).Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return Decision{}, fmt.Errorf("risk: blacklist check: %w", err)
		default:
			vals[0], found[0] = v, true
		}
	} else {
		pipe := b.rdb.Pipeline()
		var cmds [maxBanItems]*redis.StringCmd
		for i := 0; i < n; i++ {
			cmds[i] = pipe.Get(ctx, banKey(b.o.prefix, items[i].kind, items[i].id))
		}
		_, err := pipe.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return Decision{}, fmt.Errorf("risk: blacklist check: %w", err)
		}
		for i := 0; i < n; i++ {
			v, err := cmds[i].Result()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return Decision{}, fmt.Errorf("risk: blacklist check: %w", err)
			default:
				vals[i], found[i] = v, true
			}
		}
	}
	return b.decide(items[:n], vals[:n], found[:n]), nil
}

// banItem is one subject the blacklist looks up.
type banItem struct {
	kind Kind
	id   string
}

// maxBanItems bounds the subjects of one check: user, address, its
// networks, device.
const maxBanItems = 3 + maxPrefixes

// banItems are the subjects of s that Check looks up, in its order of
// precedence: user, IP address, its networks (longest prefix first),
// device.
func (b *Blacklist) banItems(s Subject) ([maxBanItems]banItem, int) {
	var items [maxBanItems]banItem
	n := 0
	if s.UserID != "" {
		items[n] = banItem{KindUser, s.UserID}
		n++
	}
	if s.IP.IsValid() {
		a := s.IP.Unmap().WithZone("")
		items[n] = banItem{KindIP, a.String()}
		n++
		lens := b.o.net6
		if a.Is4() {
			lens = b.o.net4
		}
		for _, l := range lens {
			p, _ := a.Prefix(l) // l is within a's bit length (prefixLens)
			items[n] = banItem{KindIP, p.String()}
			n++
		}
	}
	if s.DeviceID != "" {
		items[n] = banItem{KindDevice, s.DeviceID}
		n++
	}
	return items, n
}

// parseNet parses an IP network in CIDR form; an IPv4-mapped IPv6 one of
// length >= 96 is its IPv4 network. The result is masked.
func parseNet(id string) (netip.Prefix, bool) {
	if len(id) > 64 {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(id))
	if err != nil {
		return netip.Prefix{}, false
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// netID is a network's ID as stored: CIDR, or the address alone for a
// full-length prefix (the key Check reads for the address).
func netID(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// checkNet refuses to ban a network at a prefix length the blacklist does
// not look up ([BlacklistConfig.IPv4Prefixes]): such a ban would never be
// enforced.
func (b *Blacklist) checkNet(kind Kind, id string) error {
	if kind != KindIP || strings.IndexByte(id, '/') < 0 {
		return nil
	}
	p, _ := netip.ParsePrefix(id) // canonical: subjectID made it
	lens := b.o.net6
	if p.Addr().Is4() {
		lens = b.o.net4
	}
	if !slices.Contains(lens, p.Bits()) {
		return fmt.Errorf("risk: ip network %s: prefix length /%d is not looked up (BlacklistConfig prefixes %v): %w",
			id, p.Bits(), lens, ErrInvalidArgument)
	}
	return nil
}

// autoIPID is the IP subject an automatic ban of address a bans: an IPv6
// address's network at the longest configured IPv6 prefix length (/64 by
// default: one subscriber, who can pick any of its 2^64 addresses), an
// IPv4 address alone.
func (b *Blacklist) autoIPID(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() && len(b.o.net6) > 0 {
		p, _ := a.Prefix(b.o.net6[0])
		return p.String()
	}
	return a.String()
}

// decide is Check's decision on the ban keys it read: vals[i] is the value
// of items[i]'s ban key when found[i].
func (b *Blacklist) decide(items []banItem, vals []string, found []bool) Decision {
	for i := range items {
		if !found[i] {
			continue
		}
		// The key exists, so the subject is banned even if the value was
		// written by hand and does not parse. A permanent ban has no
		// Retry-After.
		d := Decision{Action: Deny, Reason: items[i].kind.reason()}
		if ban, err := parseBan(items[i].kind, items[i].id, vals[i]); err == nil && !ban.Permanent {
			if rem := ban.Until.Sub(b.o.clock.Now()); rem > 0 {
				d.RetryAfter = rem
			}
		}
		return d
	}
	return Decision{}
}

// parseBan reads "until_ms|offence|reason"; until_ms 0 marks a permanent
// ban (see blacklist_add.lua).
func parseBan(kind Kind, id, v string) (Ban, error) {
	a, rest, ok1 := strings.Cut(v, "|")
	n, reason, ok2 := strings.Cut(rest, "|")
	until, err1 := strconv.ParseInt(a, 10, 64)
	off, err2 := strconv.ParseInt(n, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return Ban{}, fmt.Errorf("risk: ban value %q: %w", v, ErrBadReply)
	}
	ban := Ban{Kind: kind, ID: id, Reason: reason, Offence: off}
	if until <= 0 {
		ban.Permanent = true
	} else {
		ban.Until = time.UnixMilli(until)
	}
	return ban, nil
}
