package dispatch_test

import (
	"fmt"

	"github.com/hai-relay/relay/dispatch"
)

// The dispatcher's policy is what the acpDenial gate checks before every
// authorization. It is derived from the client's own capabilities and
// permission decision, not stated separately.
func ExampleDispatcher_Policy() {
	d := dispatch.New(dispatch.Options{})
	defer d.Close()
	p := d.Policy()
	fmt.Println("denies all permissions:", p.DeniesAllPermissions)
	fmt.Println("advertises fs:", p.AdvertisesFS)
	fmt.Println("advertises terminal:", p.AdvertisesTerminal)
	// Output:
	// denies all permissions: true
	// advertises fs: false
	// advertises terminal: false
}
