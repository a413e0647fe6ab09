package plan

import (
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/table"
)

func init() {
	registerTable("crashed", Blocker, "the table is crashed or cannot be opened (information_schema shows no engine)", checkCrashed)
	registerTable("packed-readonly", Warning, "compressed read-only table (myisampack): it becomes writable as InnoDB", checkPacked)
	registerTable("name-too-long", Blocker, "the working names (_<t>_new, _<t>_old, <t>_emswap) exceed 64 characters", checkNameLength)
}

func checkCrashed(in *TableInput) []Finding {
	if in.Crashed == "" {
		return nil
	}
	return []Finding{newFinding("crashed", Blocker,
		"the server cannot open the table: "+in.Crashed,
		fmt.Sprintf("repair it (REPAIR TABLE %s, or myisamchk -r with the server stopped) and plan again", in.Info.QuotedName()))}
}

func checkPacked(in *TableInput) []Finding {
	if in.Info == nil || !strings.EqualFold(in.Info.RowFormat, "Compressed") {
		return nil
	}
	return []Finding{newFinding("packed-readonly", Warning,
		"compressed with myisampack (ROW_FORMAT=Compressed): read-only now; as InnoDB it becomes writable and several times larger",
		"make sure nothing relies on the table being read-only; budget disk for the uncompressed size")}
}

func checkNameLength(in *TableInput) []Finding {
	if in.Info == nil || table.NamesFit(in.Info.Name) {
		return nil
	}
	return []Finding{newFinding("name-too-long", Blocker,
		fmt.Sprintf("the working names %s, %s and %s exceed %d characters", table.ShadowName(in.Info.Name), table.OldName(in.Info.Name),
			table.SwapName(in.Info.Name), table.MaxNameLength),
		"rename the table to at most 57 characters; then plan again")}
}
