package main

import "runtime/debug"

func init() {
	if version != "dev" {
		return
	}
	// go install records the module version; a local build records the VCS revision.
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
			return
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				version = "dev-" + s.Value[:12]
			}
		}
	}
}
