// DOM helpers. Every string is put in the page as a text node or an
// attribute value, never parsed as HTML: the console has no HTML sink
// (and the page's Trusted Types policy makes any HTML sink throw).

// h(tag, props, ...children) makes an element. props: class, attributes,
// on<event> handlers (functions only), value, checked; href only as an
// in-page route (#/...). Children: nodes, or anything else as text.
export function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) {
      if (typeof v !== "function") throw new TypeError("handler " + k + " is not a function");
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.className = v;
    } else if (k === "href") {
      if (!/^#[A-Za-z0-9_\-/.%:?=&]*$/.test(v)) throw new TypeError("href: in-page routes only");
      el.setAttribute("href", v);
    } else if (k === "value") {
      el.value = String(v);
    } else if (k === "checked") {
      el.checked = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  add(el, kids);
  return el;
}

// add appends children: nodes as they are, other values as text.
export function add(el, kids) {
  for (const k of [kids].flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

let seq = 0;
// field makes a labelled form control: a label tied to it by id, the
// control made by make(id).
export function field(label, make) {
  const id = "f" + ++seq;
  const ctl = make(id);
  return [h("label", { for: id }, label), ctl];
}
