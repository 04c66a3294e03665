package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// clientFrom is the configured client in a resource's or data source's
// Configure; nil (and no error) before the provider is configured.
func clientFrom(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("got %T, want *client.Client", data))
		return nil
	}
	return c
}

// failed reports an API error as a diagnostic: what was being done, and
// the API's problem, with the request field it names.
func failed(diags *diag.Diagnostics, what string, err error) {
	var e *client.Error
	if errors.As(err, &e) && e.Field != "" {
		diags.AddError("Contrail: "+what, fmt.Sprintf("%s (field %s)", err, e.Field))
		return
	}
	diags.AddError("Contrail: "+what, err.Error())
}

// notFound reports whether err is the API's 404.
func notFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

// splitID splits an import ID of the form "a/b".
func splitID(id, want string) (string, string, error) {
	a, b, ok := strings.Cut(id, "/")
	if !ok || a == "" || b == "" || strings.Contains(b, "/") {
		return "", "", fmt.Errorf("import ID %q: want %s", id, want)
	}
	return a, b, nil
}

// timeString is t as state holds times (RFC 3339, UTC).
func timeString(t time.Time) types.String { return types.StringValue(t.UTC().Format(time.RFC3339)) }

// keepState keeps a computed value's state across plans once the
// resource exists, even a null one: a value only the create answer
// carries (creds, a token's secret) is null after an import and must
// stay so, where UseStateForUnknown would plan it as unknown, a change,
// on every plan.
type keepState struct{}

func (keepState) Description(context.Context) string {
	return "Keeps the value in state once the resource exists."
}

func (k keepState) MarkdownDescription(ctx context.Context) string { return k.Description(ctx) }

func (keepState) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() || !req.PlanValue.IsUnknown() {
		return // created, destroyed, or set by config
	}
	resp.PlanValue = req.StateValue
}
