// Package health judges an object's health as the agent waits for it:
// kstatus for the kinds it knows, and a unit's CEL health checks (the
// shape and meaning of Flux's healthCheckExprs, evaluated by Flux's own
// fluxcd/pkg/runtime/cel) for the kinds they name. The hub compiles the
// same checks when it validates an application, so an expression the
// agent would refuse never reaches a slice.
package health
