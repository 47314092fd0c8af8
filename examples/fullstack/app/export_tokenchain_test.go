package app

import "github.com/seckillkit/seckill/checkout"

// TokenChain lists the token request's steps as checkout.Steps (Name: the
// stage; Guarded; no Run), to hold them to the buy chain's rule.
func TokenChain() []checkout.Step {
	out := make([]checkout.Step, len(tokenChain))
	for i, s := range tokenChain {
		out[i] = checkout.Step{Name: s.stage, Guarded: s.guarded}
	}
	return out
}
