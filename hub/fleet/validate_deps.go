package fleet

import (
	"strings"
)

func (v *validator) dependsOn(d *document, a *Application) {
	seen := map[string]int{}
	for i, dep := range a.Spec.DependsOn {
		field := indexPath("spec.dependsOn", i)
		if j, dup := seen[dep]; dup {
			d.errorf(field, ErrDuplicate, "%q is already listed at spec.dependsOn[%d]", dep, j)
			continue
		}
		seen[dep] = i
		if dep != a.Metadata.Name && v.missing(KindApplication, dep) {
			d.errorf(field, ErrDanglingReference, "no application named %q", dep)
		}
	}
}

// cycles reports each dependsOn cycle once, named in order from its
// alphabetically first application, at that application's dependsOn entry.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	reported := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		a := v.r.Application(name)
		for _, dep := range a.Spec.DependsOn {
			if v.r.Application(dep) == nil {
				continue
			}
			switch color[dep] {
			case white:
				visit(dep)
			case grey:
				start := len(stack) - 1
				for stack[start] != dep {
					start--
				}
				v.reportCycle(append([]string(nil), stack[start:]...), reported)
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, a := range v.r.Applications {
		if color[a.Metadata.Name] == white {
			visit(a.Metadata.Name)
		}
	}
}

func (v *validator) reportCycle(cycle []string, reported map[string]bool) {
	// Rotate to start at the smallest name, so the message is stable.
	min := 0
	for i, n := range cycle {
		if n < cycle[min] {
			min = i
		}
	}
	cycle = append(cycle[min:], cycle[:min]...)
	text := strings.Join(append(cycle, cycle[0]), " → ")
	if reported[text] {
		return
	}
	reported[text] = true
	first := v.r.Application(cycle[0])
	next := cycle[0]
	if len(cycle) > 1 {
		next = cycle[1]
	}
	idx := 0
	for i, dep := range first.Spec.DependsOn {
		if dep == next {
			idx = i
			break
		}
	}
	v.docs[first].errorf(indexPath("spec.dependsOn", idx), ErrDependencyCycle, "%s", text)
}
