package admission

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// expression is one CEL expression and the types it may evaluate to, as
// the apiserver's compiler wants it.
type expression struct {
	text    string
	returns []*cel.Type
}

func (e expression) GetExpression() string    { return e.text }
func (e expression) ReturnTypes() []*cel.Type { return e.returns }

// variable is a named expression (spec.variables[]).
type variable struct {
	expression
	name string
}

func (v variable) GetName() string { return v.name }

// checker compiles one policy's expressions with the environment a
// kube-apiserver uses to validate a new ValidatingAdmissionPolicy.
type checker struct {
	compiler *plugincel.CompositedCompiler
}

// envSets caches the base environments by compatibility version; building
// one takes milliseconds, a policy's compile far less.
var envSets sync.Map // "major.minor" → *environment.EnvSet

func newChecker(compat *version.Version) (*checker, error) {
	key := fmt.Sprintf("%d.%d", compat.Major(), compat.Minor())
	base, ok := envSets.Load(key)
	if !ok {
		base, _ = envSets.LoadOrStore(key, environment.MustBaseEnvSet(compat))
	}
	// A composited compiler holds the policy's variables, so each policy
	// gets its own.
	c, err := plugincel.NewCompositedCompiler(base.(*environment.EnvSet))
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	return &checker{compiler: c}, nil
}

// The declarations a ValidatingAdmissionPolicy without params sees: the
// authorizer for variables, match conditions and validations, not for
// message expressions (as the admission plugin compiles them).
var (
	conditionVars = plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	messageVars   = plugincel.OptionalVariableDeclarations{}
)

// variable compiles and declares a variable for later expressions.
func (c *checker) variable(name, text string) error {
	res := c.compiler.CompileAndStoreVariable(variable{expression{text, []*cel.Type{cel.AnyType}}, name}, conditionVars, environment.NewExpressions)
	return compileError(res)
}

// condition compiles an expression that must be a bool.
func (c *checker) condition(text string) error {
	res := c.compiler.CompileCELExpression(expression{text, []*cel.Type{cel.BoolType}}, conditionVars, environment.NewExpressions)
	return compileError(res)
}

// message compiles a messageExpression, which must be a string.
func (c *checker) message(text string) error {
	res := c.compiler.CompileCELExpression(expression{text, []*cel.Type{cel.StringType}}, messageVars, environment.NewExpressions)
	return compileError(res)
}

// compileError turns a compilation result into one line per issue,
// positioned in the expression ("1:8: undeclared reference to 'objekt'").
func compileError(res plugincel.CompilationResult) error {
	if res.Error == nil {
		return nil
	}
	var ce *apiservercel.CompilationError
	if errors.As(res.Error, &ce) && ce.Issues != nil {
		var msgs []string
		for _, e := range ce.Issues.Errors() {
			// The container is always empty here; naming it says nothing.
			msg := strings.TrimSuffix(e.Message, " (in container '')")
			if loc := e.Location; loc != nil && loc.Line() > 0 {
				msg = strconv.Itoa(loc.Line()) + ":" + strconv.Itoa(loc.Column()+1) + ": " + msg
			}
			msgs = append(msgs, msg)
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%w: %s", ErrCEL, strings.Join(msgs, "; "))
		}
	}
	return fmt.Errorf("%w: %s", ErrCEL, res.Error.Detail)
}
