/**
 * A form generated from a JSON Schema of type `object` (a workflow's `input`): one labelled control per property
 * (a text field, a number field, a checkbox, a select for an `enum`), an object with `properties` as a nested
 * fieldset of its own properties, an array of such items (or of scalars) as a fieldset of items with Add and
 * Remove buttons, and a JSON text area for anything else (an object without `properties`, an array of arrays).
 * Required properties are marked, `description` is the hint, `default` the initial value. {@link valuesOf} turns
 * what was typed into the arguments object, naming the property (`entities[0].name`) whose value is missing or
 * does not parse.
 */
import { useState } from 'preact/hooks';

/** The part of a JSON Schema the form reads. */
export interface JsonSchema {
  type?: string | string[];
  title?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  items?: JsonSchema;
}

/** What the form holds for a schema: the text of a field, the values of an object's properties, an array's items. */
export type FormValue = string | FormValue[] | FormObject;
/** What the form holds for an object: a value per property. */
export interface FormObject {
  [name: string]: FormValue;
}

/** How a property is edited. */
type Control = 'text' | 'number' | 'integer' | 'boolean' | 'enum' | 'object' | 'array' | 'json';

function typeOf(schema: JsonSchema): string | undefined {
  return Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
}

function controlOf(schema: JsonSchema): Control {
  if (Array.isArray(schema.enum) && schema.enum.every((value) => typeof value === 'string')) return 'enum';
  const type = typeOf(schema);
  if (type === 'string') return 'text';
  if (type === 'number' || type === 'integer' || type === 'boolean') return type;
  if ((type === 'object' || (type === undefined && schema.properties)) && Object.keys(schema.properties ?? {}).length > 0) return 'object';
  // An array of arrays or of free-form objects is clearer as JSON than as nested lists of JSON fields.
  if (type === 'array' && schema.items && !['array', 'json'].includes(controlOf(schema.items))) return 'array';
  return 'json';
}

/** The form value of `data` (a default) for `schema`: texts for fields, nested values for objects and arrays. */
function formValueOf(schema: JsonSchema, data: unknown): FormValue {
  const control = controlOf(schema);
  if (control === 'object') {
    const given = typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : {};
    return Object.fromEntries(
      Object.entries(schema.properties ?? {}).map(([name, property]) => [name, formValueOf(property, given[name] ?? property.default)]),
    );
  }
  if (control === 'array') return Array.isArray(data) ? data.map((item) => formValueOf(schema.items!, item)) : [];
  if (data === undefined) return '';
  return typeof data === 'string' || typeof data === 'number' || typeof data === 'boolean' ? String(data) : JSON.stringify(data, null, 2);
}

/** The values of a fresh form for `schema`, by property. */
export function initialValues(schema: JsonSchema): FormObject {
  return formValueOf({ ...schema, type: 'object' }, schema.default) as FormObject;
}

/** Whether anything was typed in `value` (an unchecked checkbox counts as nothing). */
function filled(value: FormValue): boolean {
  if (typeof value === 'string') return value.trim() !== '' && value !== 'false';
  return Array.isArray(value) ? value.length > 0 : Object.values(value).some(filled);
}

/**
 * The value `value` stands for under `schema` at `path`, or undefined to leave it out (an empty optional field).
 * @throws Error naming `path` when a required field is empty or a value does not parse.
 */
function parse(schema: JsonSchema, value: FormValue, path: string, required: boolean): unknown {
  const control = controlOf(schema);
  if (control === 'object') {
    if (!required && !filled(value)) return undefined;
    const fields = value as FormObject;
    const needed = new Set(schema.required ?? []);
    const result: Record<string, unknown> = {};
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      const parsed = parse(property, fields[name] ?? '', path ? `${path}.${name}` : name, needed.has(name));
      if (parsed !== undefined) result[name] = parsed;
    }
    return result;
  }
  if (control === 'array') {
    const items = value as FormValue[];
    if (!required && items.length === 0) return undefined;
    return items.map((item, i) => parse(schema.items!, item, `${path}[${String(i)}]`, true));
  }
  const text = value as string;
  if (control === 'boolean') return text === 'true';
  if (text.trim() === '') {
    if (required) throw new Error(`${path} is required: fill it in`);
    return undefined;
  }
  if (control === 'number' || control === 'integer') {
    const number = Number(text);
    if (!Number.isFinite(number) || (control === 'integer' && !Number.isInteger(number)))
      throw new Error(`${path} must be ${control === 'integer' ? 'an integer' : 'a number'}, got "${text}"`);
    return number;
  }
  if (control === 'json') {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${path} must be JSON (for example ["a", "b"] or {"key": "value"}), got "${text}"`);
    }
  }
  return text;
}

/**
 * The arguments the form's `values` stand for: empty optional fields (and untouched optional objects and arrays)
 * left out, numbers and JSON parsed.
 * @throws Error naming the property whose value is missing (required) or does not parse.
 */
export function valuesOf(schema: JsonSchema, values: FormObject): Record<string, unknown> {
  // A schema without properties (a workflow without input: a bare `{type: object}`) has no fields to fill.
  if (Object.keys(schema.properties ?? {}).length === 0) return {};
  return parse({ ...schema, type: 'object' }, values, '', true) as Record<string, unknown>;
}

/** An id for a property at `path` (`entities[0].name` → `entities-0-name`). */
const idOf = (prefix: string, path: string) => `${prefix}-${path.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/-+$/, '')}`;

/** The control of one property: `label` is its name (or title), `path` where it is in the arguments. */
function Field(props: {
  schema: JsonSchema;
  value: FormValue;
  onChange: (value: FormValue) => void;
  label: string;
  path: string;
  required: boolean;
  idPrefix: string;
}) {
  const { schema, value, onChange, label: name, path, required, idPrefix } = props;
  const id = idOf(idPrefix, path);
  const hintId = schema.description ? `${id}-hint` : undefined;
  const control = controlOf(schema);
  const label = (
    <>
      {name}
      {required && <span aria-hidden="true"> *</span>}
    </>
  );
  const hint = schema.description && (
    <p id={hintId} class="muted hint">
      {schema.description}
      {control === 'json' && ' (JSON)'}
    </p>
  );
  if (control === 'object') {
    return (
      <fieldset class="nested" aria-describedby={hintId}>
        <legend>{label}</legend>
        {hint}
        <Properties schema={schema} values={value as FormObject} onChange={onChange} path={path} idPrefix={idPrefix} />
      </fieldset>
    );
  }
  if (control === 'array') {
    const items = value as FormValue[];
    const itemSchema = schema.items!;
    const set = (i: number, item: FormValue) => onChange(items.map((old, j) => (j === i ? item : old)));
    return (
      <fieldset class="nested" aria-describedby={hintId}>
        <legend>{label}</legend>
        {hint}
        {items.map((item, i) => {
          const itemName = `${name} ${String(i + 1)}`;
          return (
            <div key={i} class="array-item">
              <Field
                schema={itemSchema}
                value={item}
                onChange={(next) => set(i, next)}
                label={itemName}
                path={`${path}[${String(i)}]`}
                required
                idPrefix={idPrefix}
              />
              <button type="button" class="quiet" onClick={() => onChange(items.filter((_, j) => j !== i))}>
                Remove {itemName}
              </button>
            </div>
          );
        })}
        <button type="button" class="quiet" onClick={() => onChange([...items, formValueOf(itemSchema, itemSchema.default)])}>
          Add to {name}
        </button>
      </fieldset>
    );
  }
  const text = value as string;
  const set = (next: string) => onChange(next);
  const common = { id, name: path, 'aria-describedby': hintId, required };
  return (
    <div class="field">
      {control === 'boolean' ? (
        <label class="check">
          <input {...common} type="checkbox" checked={text === 'true'} onChange={(e) => set(String(e.currentTarget.checked))} /> {label}
        </label>
      ) : (
        <label for={id}>{label}</label>
      )}
      {control === 'enum' && (
        <select {...common} value={text} onChange={(e) => set(e.currentTarget.value)}>
          <option value="">{required ? 'Choose…' : '(none)'}</option>
          {(schema.enum as string[]).map((option) => (
            <option key={option} value={option}>
              {option}
            </option>
          ))}
        </select>
      )}
      {control === 'text' && <input {...common} type="text" value={text} onInput={(e) => set(e.currentTarget.value)} />}
      {(control === 'number' || control === 'integer') && (
        <input
          {...common}
          type="number"
          step={control === 'integer' ? 1 : 'any'}
          value={text}
          onInput={(e) => set(e.currentTarget.value)}
        />
      )}
      {control === 'json' && <textarea {...common} value={text} onInput={(e) => set(e.currentTarget.value)} />}
      {hint}
    </div>
  );
}

/** The controls of an object schema's properties, at `path` ('' for the arguments themselves). */
function Properties(props: {
  schema: JsonSchema;
  values: FormObject;
  onChange: (values: FormObject) => void;
  path: string;
  idPrefix: string;
}) {
  const { schema, values, onChange, path, idPrefix } = props;
  const required = new Set(schema.required ?? []);
  return (
    <>
      {Object.entries(schema.properties ?? {}).map(([name, property]) => (
        <Field
          key={name}
          schema={property}
          value={values[name] ?? formValueOf(property, property.default)}
          onChange={(value) => onChange({ ...values, [name]: value })}
          label={property.title ?? name}
          path={path ? `${path}.${name}` : name}
          required={required.has(name)}
          idPrefix={idPrefix}
        />
      ))}
    </>
  );
}

/** The controls of `schema`'s properties; `texts` holds what was typed, `onChange` gets each edit. `idPrefix` keeps ids unique. */
export function SchemaFields(props: { schema: JsonSchema; texts: FormObject; onChange: (texts: FormObject) => void; idPrefix: string }) {
  const { schema, texts, onChange, idPrefix } = props;
  if (Object.keys(schema.properties ?? {}).length === 0) return <p class="muted">This workflow takes no input.</p>;
  return <Properties schema={schema} values={texts} onChange={onChange} path="" idPrefix={idPrefix} />;
}

/** The values of a form for `schema`, fresh whenever `key` changes (another workflow). */
export function useSchemaTexts(schema: JsonSchema, key: string): [FormObject, (texts: FormObject) => void] {
  const [state, setState] = useState<{ key: string; texts: FormObject }>({ key, texts: initialValues(schema) });
  const texts = state.key === key ? state.texts : initialValues(schema);
  return [texts, (next) => setState({ key, texts: next })];
}
