CREATE SCHEMA "pool";
--> statement-breakpoint
CREATE SEQUENCE "pool"."lease_epoch" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
CREATE TABLE "pool"."agent_leases" (
	"id" text PRIMARY KEY NOT NULL,
	"agent_id" text NOT NULL,
	"slot_no" integer NOT NULL,
	"epoch" bigint DEFAULT nextval('pool.lease_epoch') NOT NULL,
	"work_type" text NOT NULL,
	"work_id" text NOT NULL,
	"project_id" text NOT NULL,
	"request_id" text,
	"acquired_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"ended_at" timestamp with time zone,
	"end_reason" text,
	CONSTRAINT "agent_leases_epoch_unique" UNIQUE("epoch"),
	CONSTRAINT "agent_leases_request_id_unique" UNIQUE("request_id")
);
--> statement-breakpoint
CREATE TABLE "pool"."agent_slots" (
	"agent_id" text NOT NULL,
	"slot_no" integer NOT NULL,
	CONSTRAINT "agent_slots_agent_id_slot_no_pk" PRIMARY KEY("agent_id","slot_no")
);
--> statement-breakpoint
CREATE TABLE "pool"."agents" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"agent_type" text NOT NULL,
	"capabilities" jsonb NOT NULL,
	"configuration" jsonb NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"concurrency" integer DEFAULT 1 NOT NULL,
	"create_request_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agents_name_unique" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "pool"."lease_waiters" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"agent_id" text DEFAULT '' NOT NULL,
	"capability" text DEFAULT '' NOT NULL,
	"agent_type" text DEFAULT '' NOT NULL,
	"project_id" text DEFAULT '' NOT NULL,
	"work_id" text DEFAULT '' NOT NULL,
	"alive_until" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "pool"."agent_leases" ADD CONSTRAINT "agent_leases_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "pool"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "pool"."agent_slots" ADD CONSTRAINT "agent_slots_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "pool"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "agent_leases_one_active_per_slot" ON "pool"."agent_leases" USING btree ("agent_id","slot_no") WHERE ended_at is null;--> statement-breakpoint
CREATE INDEX "agent_leases_open_by_expiry" ON "pool"."agent_leases" USING btree ("expires_at") WHERE ended_at is null;--> statement-breakpoint
CREATE INDEX "agent_leases_open_by_project" ON "pool"."agent_leases" USING btree ("project_id") WHERE ended_at is null;