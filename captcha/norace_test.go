//go:build !race

package captcha

const raceEnabled = false
