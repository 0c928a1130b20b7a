package userdata

import (
	"os"
	"testing"
)

// The sandbox is this test binary started again: Main makes it one.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}
