package app_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// waitingTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise. They wait more than they compute (a
// browser's countdown to the sale, a consumer group's rebalances, a
// queue's admission rate, the pipeline's drain: the package's CPU time is
// about a quarter of its run's), so more of them at once than the default
// GOMAXPROCS overlap their waits on a 2-core machine.
const waitingTests = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < waitingTests {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingTests)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
