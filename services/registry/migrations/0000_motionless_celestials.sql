CREATE SCHEMA "registry";
--> statement-breakpoint
CREATE TABLE "registry"."adapters" (
	"type" text PRIMARY KEY NOT NULL,
	"display_name" text NOT NULL,
	"model_family" text NOT NULL,
	"capabilities" jsonb NOT NULL,
	"context_tokens" bigint DEFAULT 0 NOT NULL,
	"max_output_tokens" bigint DEFAULT 0 NOT NULL,
	"concurrency" integer DEFAULT 0 NOT NULL,
	"timeout_ms" bigint DEFAULT 0 NOT NULL,
	"egress" boolean DEFAULT false NOT NULL,
	"trust_class" text NOT NULL,
	"quality_tier" integer NOT NULL,
	"accepts_byo_key" boolean DEFAULT false NOT NULL,
	"requires_byo_key" boolean DEFAULT false NOT NULL,
	"demo" boolean DEFAULT false NOT NULL,
	"ready" boolean DEFAULT true NOT NULL,
	"ready_reason" text DEFAULT '' NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registry"."api_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"token_hash" text NOT NULL,
	"scopes" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "registry"."projects" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registry"."rate_cards" (
	"adapter_type" text NOT NULL,
	"revision" bigint NOT NULL,
	"input_micro_usd_per_mtok" bigint NOT NULL,
	"output_micro_usd_per_mtok" bigint NOT NULL,
	"micro_usd_per_second" bigint NOT NULL,
	"micro_usd_per_task" bigint NOT NULL,
	"source" text NOT NULL,
	"verified_at" timestamp with time zone,
	"reviewer" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "rate_cards_adapter_type_revision_pk" PRIMARY KEY("adapter_type","revision")
);
--> statement-breakpoint
CREATE TABLE "registry"."secrets" (
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"version" bigint NOT NULL,
	"ciphertext" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "secrets_project_id_name_pk" PRIMARY KEY("project_id","name")
);
--> statement-breakpoint
ALTER TABLE "registry"."api_tokens" ADD CONSTRAINT "api_tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "registry"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "registry"."secrets" ADD CONSTRAINT "secrets_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "registry"."projects"("id") ON DELETE no action ON UPDATE no action;