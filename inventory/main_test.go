package inventory_test

import (
	"os"
	"testing"

	"flashsale/internal/testsupport"
)

func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }
