package gates_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
)

func ExampleMissionLease() {
	for _, t := range []model.Task{
		{MissionID: "M-2026-0042", LeaseID: "S-7f3a.1"},
		{MissionID: "M-2026-0042"},
		{MissionID: " M-2026-0042", LeaseID: "S-7f3a.1"}, // no trimming
		{MissionID: "M-2026-0042", LeaseID: strings.Repeat("S", 129)},
	} {
		v := gates.MissionLease(t)
		if v.Passed {
			fmt.Println(v.Gate, "passed")
			continue
		}
		fmt.Printf("%s %s → %s\n", v.Gate, v.Code, gates.Outcome(v))
	}
	// Output:
	// missionLease passed
	// missionLease missing_lease_id → rejected
	// missionLease invalid_mission_id → rejected
	// missionLease invalid_lease_id → rejected
}

func ExampleAuthority() {
	// No [authority] command configured: NewAuthority returns nil, and the
	// gate fails closed.
	auth := gates.NewAuthority(nil, 5*time.Second)
	t := model.Task{ID: "T-1", MissionID: "M-1", LeaseID: "S-1", Caller: "codex", Target: "claude"}
	v, _ := gates.Authority(context.Background(), auth, gates.NewAuthorityRequest(t, time.Now()))
	fmt.Println(v.Gate, v.Passed, v.Code, gates.Outcome(v))
	// Output:
	// authority false authority_not_configured blocked
}
