type JsonSchema = Record<string, unknown>;

const deepestNesting = 8;

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A plausible value for a JSON Schema: `const`, `default` or the first `enum` value when given,
 * otherwise one built from the type, with every required property of an object filled in. Covers
 * the subset of JSON Schema that structured-output calls use; anything else becomes null.
 */
export function valueForSchema(schema: unknown, depth = 0): unknown {
  if (!isSchema(schema) || depth > deepestNesting) return null;
  if ('const' in schema) return schema.const;
  if ('default' in schema) return schema.default;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const keyword of ['anyOf', 'oneOf', 'allOf']) {
    const options = schema[keyword];
    if (Array.isArray(options)) {
      const first = options.find((option) => !(isSchema(option) && option.type === 'null')) ?? options[0];
      return valueForSchema(first, depth + 1);
    }
  }
  const declaredType = Array.isArray(schema.type)
    ? (schema.type.find((type) => type !== 'null') ?? schema.type[0])
    : schema.type;
  const type = declaredType ?? (isSchema(schema.properties) ? 'object' : undefined);
  switch (type) {
    case 'object': {
      const properties = isSchema(schema.properties) ? schema.properties : {};
      const required = Array.isArray(schema.required) ? schema.required.filter((name) => typeof name === 'string') : [];
      const value: Record<string, unknown> = {};
      for (const name of required) value[name] = valueForSchema(properties[name] ?? {}, depth + 1);
      return value;
    }
    case 'array': {
      const count = typeof schema.minItems === 'number' ? schema.minItems : 0;
      return Array.from({ length: count }, () => valueForSchema(schema.items, depth + 1));
    }
    case 'string':
      return stringFor(schema);
    case 'integer':
      return numberFor(schema, true);
    case 'number':
      return numberFor(schema, false);
    case 'boolean':
      return true;
    default:
      return null;
  }
}

function stringFor(schema: JsonSchema): string {
  if (schema.format === 'date-time') return new Date(0).toISOString();
  if (schema.format === 'uri' || schema.format === 'url') return 'https://example.com/demo';
  const minimum = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const text = 'demo value';
  return text.length >= minimum ? text : text.padEnd(minimum, '.');
}

function numberFor(schema: JsonSchema, integer: boolean): number {
  const minimum = typeof schema.minimum === 'number' ? schema.minimum : undefined;
  const maximum = typeof schema.maximum === 'number' ? schema.maximum : undefined;
  let value = minimum !== undefined && maximum !== undefined ? (minimum + maximum) / 2 : (minimum ?? maximum ?? 1);
  if (integer) value = Math.ceil(value);
  return value;
}
