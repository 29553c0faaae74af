package inventory_test

import (
	"os"
	"testing"

	"flashsale/inventory/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
